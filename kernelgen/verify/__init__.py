"""The trust boundary: everything that decides whether a candidate kernel is correct and how fast it
is. It imports nothing from kernelgen.llm, kernelgen.optimize or kernelgen.offline (a test holds it
to that): code that judges must not depend on code that writes what is judged."""
