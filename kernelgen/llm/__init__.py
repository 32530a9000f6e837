"""The LLM path: configuration, an OpenAI-compatible client with recording and replay, prompts
rendered from templates/prompts/, reply parsing, generation with repair, and the optimization
proposer. Nothing here judges a kernel: every candidate goes through kernelgen.verify."""
