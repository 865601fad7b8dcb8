"""The storage plane: everything git holds (SPEC §3).

Owns the refs and their compare-and-swap updates (`store`, the only libgit2 writer, generic
git), where genjob keeps things: every ref name and `.git/genjob/` file (`layout`, no libgit2),
the archive of finished jobs and its rows (`archive`), blobs read and hashed in bounded memory
(`blobs`), the job records read back from the refs (`records`), notes by path and their union
merge (`notes`), the repository's directories, a child git's environment and trailers read
without libgit2 (`gitdir`), the fast paths' ref reads and their one memo, stamped with what
the slow path read (`fastrefs`, `memo`), ref locks and writer records (`locks`), the named crash points
(`faults`), leased pushes and fetches (`remote`), the one ref-writer interface events are
published through, local or leased-remote (`publish`), the trust store read from a tree
(`truststore`), the work tree for output paths (`worktree`), and the commit `apply` lands,
signed as the user's git signs commits (`usercommit`).

May import: the documents plane and this package.
"""
