dist_doc_DATA += doc/design.md doc/kernels.md doc/ulysses.md doc/reliability.md doc/cli.md doc/minicluster.md
