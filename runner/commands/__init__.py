"""The command layer: one module per ``bench`` command (its options and its call into the library,
nothing else), and the options and helpers they share. The root app (bench.runner.cli) registers them."""
