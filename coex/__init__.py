"""The pure core of ckcd-coex: decisions only, no I/O beyond what a function is handed."""
