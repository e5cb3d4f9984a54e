"""The TensorFlow child process of ``bench run``: ``python -m bench.runner.train.trainer`` (one process, or
one Horovod rank) and ``python -m bench.runner.train.workers`` (the tasks of a one-host cluster). Only the
launcher starts these, as subprocesses; nothing else in bench imports them (tests and the runner's
benchmark do, to exercise them)."""
