"""Code snapshots: every job runs the project as it was when it was submitted (docs/jobs.md,
"Code snapshots"): a project's files frozen by content, and a job's view of them.

The modules that freeze, link and collect (all but spec.py) use the standard library and each
other only: a login runs them with `python3 -c` (spec.py: script_source), so a snapshot is
made the same way on both sides.

Layout of a store (`<output_dir>/.snapshots`, on the file system the jobs see):

    objects/ab/cdef...[.x]   one read-only file per content (sha256; `.x`: executable)
    manifests/<id>.json      a snapshot: every path with its object, every symlink's target
    trees/<id>/...           the snapshot as a directory tree of hard links to the objects
    index/<root hash>.json   per project: path -> size, mtime, inode, digest (skips rehashing)
    index/<root hash>.state  per project: git's view of it when last frozen, and that snapshot

A snapshot's id is the hash of its manifest, so an unchanged project is the same snapshot and
costs no copy; an edit of one file adds one object and one tree of links. A job's working
directory (`<run dir>/code`) links each top-level entry of the tree, so what a job writes
there stays in its run directory; paths named "in place" link to the live project instead.
"""
