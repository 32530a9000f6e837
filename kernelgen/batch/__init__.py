"""`kernelgen batch`: many operators, many GPUs, many hosts.

    plan       which specs, which operator names; a bad spec stays in the plan with its reason
    basis      what decides an operator's result (the spec as data, the tool, the device, the options)
    resume     what an earlier run left of an operator folder, and the job's result record
    targets    which devices a local run uses (`--gpus`, `--per-gpu`), each with the environment that pins it
    footprint  an operator's peak GPU memory, estimated on shape-only tensors before it starts
    placement  when and where an operator starts: where its memory fits, a large one alone
    job        one operator's work: `kernelgen new`, `optimize`, `bench --json`
    step       one of those commands in a process of its own, its output, its phases; stepfork: forked
    phases     where a step's seconds went, from its progress lines
    outcome    why a step did not end well, in its own words; out of memory as such
    engine     the interface every engine keeps, and its events
    local      worker processes on this host's devices; an idle one lends its GPU to searches (kernelgen.lending)
    worker     the worker process: jobs in on stdin, events and results out on stdout
    services   the KernelGen service each worker's steps judge in, stopped when the batch ends
    ray_engine one Ray task per operator (`num_gpus=1`), the operator folder shipped both ways
    artifacts  packing an operator folder for a Ray task and unpacking what comes back
    checkpoint a Ray task's folder sent back after every finished round
    tables     the report's columns, as data
    report     pass rate, fast_1, geomeans, seconds; markdown, JSON, PNG
    live       the report as it stands, rewritten as operators end
    progress   live progress per operator and per device
    run        the whole batch: plan -> engine -> report
"""
