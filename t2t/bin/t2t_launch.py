"""t2t-launch: run a command as a local multi-process TensorFlow cluster on 127.0.0.1.

  t2t-launch --num_workers=2 -- t2t-trainer --problem=PROBLEM --model=MODEL ...

Every task runs the command after `--` with its own TF_CONFIG (the trainer reads its
role from it). Layouts:

  --num_workers=N              {"worker": [N]}: MultiWorkerMirroredStrategy, worker 0
                               is the chief (TensorFlow's convention)
  --num_workers=N --chief      {"chief": [1], "worker": [N]}
  --num_workers=N --num_ps=M   {"chief": [1], "worker": [N], "ps": [M]}:
                               ParameterServerStrategy, the chief is the coordinator

Ports are free ones the OS picks, or --port_base, --port_base+1, ... in chief, worker,
ps order. Each task's output is streamed with a `[type:index] ` prefix (and written to
--log_dir/<type>-<index>.log). When a task fails, the others get SIGTERM (SIGKILL after
--grace_period_secs) and t2t-launch exits with the failing task's code. Ctrl-C or
SIGTERM forwards SIGTERM to every task (the chief can save a checkpoint); a second one
kills them. With ps tasks it goes to the chief first, and the servers are stopped once
the chief has exited (they hold the variables its last checkpoint reads).
"""

from __future__ import annotations

import functools
import json
import sys
from typing import NoReturn

from absl import flags

from t2t.bin import flag_help, output_paths, t2t_flag_compat
from t2t.cluster import launch as launch_lib
from t2t.cluster import tf_config as tf_config_lib

FLAGS = flags.FLAGS

flags.DEFINE_integer("num_workers", 1, "Worker tasks.")
flags.DEFINE_integer("num_ps", 0, "Parameter-server tasks (> 0: ParameterServerStrategy, "
                     "with a chief as the coordinator).")
flags.DEFINE_bool("chief", False, "A separate chief task besides the workers (always there "
                  "with --num_ps > 0; without it worker 0 is the chief).")
flags.DEFINE_integer("port_base", None, "First port: tasks get port_base, port_base+1, ... "
                     "(default: free ports the OS picks).")
# absl.logging defines --log_dir too (for its own log files, which t2t-launch never
# writes): this definition replaces it.
flags.DEFINE_string("log_dir", None, "Also write each task's output to "
                    "LOG_DIR/<type>-<index>.log.", allow_override=True)
flags.DEFINE_float("grace_period_secs", 30.0, "Seconds between SIGTERM and SIGKILL when "
                   "stopping tasks.")


def fail(message: str) -> NoReturn:
    """A clear error without a traceback, exit status 1. (common_flags.fail's twin: that
    module would add trainer flags, e.g. --t2t_usr_dir, that t2t-launch must not take.)"""
    sys.stderr.write(f"error: {message}\n")
    sys.exit(1)


def main(argv: list[str], command: list[str]) -> None:
    if len(argv) > 1:
        fail(f"unexpected arguments {argv[1:]} before `--`; the command goes after it: "
             f"t2t-launch --num_workers=2 -- t2t-trainer --problem=...")
    if not command:
        fail("no command: give it after `--`, e.g. "
             "t2t-launch --num_workers=2 -- t2t-trainer --problem=...")
    output_paths.check_dir("log_dir", FLAGS.log_dir)  # before any task starts
    try:
        layout = tf_config_lib.Layout(FLAGS.num_workers, FLAGS.num_ps, FLAGS.chief)
        cluster = tf_config_lib.local_cluster(layout, FLAGS.port_base)
        launcher = launch_lib.Launcher(command, cluster, log_dir=FLAGS.log_dir,
                                       grace_period_secs=FLAGS.grace_period_secs)
        launcher.say(f"{layout.strategy} cluster: {json.dumps(cluster)}")
        status = launcher.run()
    except (tf_config_lib.ClusterError, launch_lib.LaunchError) as e:
        fail(str(e))
    sys.exit(status)


def run() -> None:
    """Console-script entry point."""
    argv, command = launch_lib.split_command(sys.argv)
    t2t_flag_compat.accept_shared_flags("t2t-launch")
    flag_help.run(functools.partial(main, command=command), __doc__, argv=argv)


if __name__ == "__main__":
    run()
