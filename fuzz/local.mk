# fuzz/: corpus replay of the fuzz harnesses in make check (filled in below).
