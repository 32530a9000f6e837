"""The KernelGen service: a per-user, per-device judge process that outlives one command.

It is the judge — the trusted process — kept warm: torch imported, the device started, a fork server
ready to give each candidate a fresh sandboxed worker in milliseconds, and the workers of kernels
that passed kept for the next command on the same kernel file. It lives under verify/judge/ because
it is the judge process: the layout test that keeps the judge from importing anything that writes or
proposes kernels covers everything this long-lived process can load. The CLI's side (finding it,
starting it, falling back to working in its own process) is kernelgen.serve.

    place.py    where a service lives (a 0700 per-user runtime folder) and the key it answers to
    wire.py     the messages, validated by pydantic on both sides
    daemon.py   the process: socket, hello, one job at a time, status, stop, idling out
    jobs.py     the work: `test`, `bench` and `new`'s checks, through the same runner as in-process
    pool.py     warm workers kept between commands, one kernel file each
"""
