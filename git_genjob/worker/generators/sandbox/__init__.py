"""The process sandbox every `exec:` generator runs in: bubblewrap, else Landlock, else refused.

A generator is an agent CLI following an instruction that may come from a hostile remote. In
the sandbox it sees the scratch tree (read-write), the job files (read-only), the system
(`/usr`, `/bin`, `/lib*`, the files of `/etc` that tools read, a few devices), an empty HOME and
a private /tmp (both inside the attempt's directory, removed with it), the program it was
started as, and what the worker's owner adds with `--sandbox-ro` / `--sandbox-rw`. Nothing
else: not the repository, not the worker's key, not the user's HOME. Its network is off unless
`--allow-net`, or `--allow-host` (only through the worker's filtering proxy). Resource limits
(setrlimit) bound its processes, memory, file size and CPU time. A worker running as root
runs its generator as `nobody`: root's processes are exempt from the process limit.

Mechanisms, in order of preference:

- `bwrap` (bubblewrap, packaged by every major distribution): the view is a new mount
  namespace built from bind mounts, with new PID, network and IPC namespaces. When the
  generator's first process ends, the PID namespace ends, and everything it started (even
  with `setsid`) dies with it. `--die-with-parent` ties it to the worker.
- `landlock` (Linux 5.13+, no dependency): the kernel's own path-based access control over
  the real file system, applied to the generator before it starts; TCP bind and connect are
  denied by Landlock itself (ABI 4+); abstract Unix sockets and signals outside the sandbox
  are scoped off (ABI 6+). Where the worker may create namespaces (root, or unprivileged user
  namespaces), the generator also gets its own PID, network and IPC namespaces. A root worker
  confines one thread of its own and starts the generator from it (no fork of the worker);
  a non-root worker confines the forked child.

Neither: the worker refuses to run an exec generator, naming both and `--no-sandbox`.

The rooms: `options` (the values), `choose` (which mechanism, or the refusal), `confine` (one
attempt's launch), `paths` (what is shown), `bwrap` and `landlock` (each mechanism's launch),
`identity` (who the generator runs as), `limits`, `seccomp` and `kernel` (the system calls).
"""
