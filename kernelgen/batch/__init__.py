"""`kernelgen batch`: many operators, many GPUs, many hosts.

    plan      which specs, which operator names; a bad spec stays in the plan with its reason
    resume    what an earlier run left of an operator folder, and the job's result record
    targets   which devices a local run uses (`--gpus`), each with the environment that pins it
    job       one operator's work: `kernelgen new`, `optimize`, `bench --json`, as CLI subprocesses
    engine    the interface every engine keeps, and its events
    local     one worker process per GPU on this host; an idle one lends its GPU to searches (kernelgen.lending)
    worker    the worker process: jobs in on stdin, events and results out on stdout
    ray_engine  one Ray task per operator (`num_gpus=1`), the operator folder shipped both ways
    artifacts packing an operator folder for a Ray task and unpacking what comes back
    tables    the report's columns, as data
    report    pass rate, fast_1, geomeans; markdown, JSON, PNG
    progress  live progress per operator and per device
    run       the whole batch: plan -> engine -> report
"""
