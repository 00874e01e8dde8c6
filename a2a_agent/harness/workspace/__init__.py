"""The workspace room: a task's folder on disk, its git repository and the box every command
runs in. It imports no other room, so it is the floor the rest stands on. Read in this
order: `files` (writes and reads that follow no link), `safe_files` (the model's file tools'
paths), `sandbox` (bubblewrap), `reaping` (children waited for by their loop, through a pidfd),
`commands` (a command run with a timeout, `CommandResult`),
`unpack` (archives checked, then extracted), `git` (how the harness's own git runs and the
repository config it owns), `fingerprints` (a tree's metadata hashed, without a process),
`commits` (a commit made from the index without `git commit`, and git's commit script),
`packs` (a checkpoint's pack written from loose objects), `workspace` (`Workspace`: commit,
fingerprint, restore) and `git_remote` (fetch, ls-remote and push to a caller's repository).
"""
