"""t2t-make-tf-configs: TF_CONFIGs for a cluster of machines, or a Kubernetes TFJob.

TF_CONFIGs (Tensor2Tensor's make_tf_configs, in TF2 terms):

  t2t-make-tf-configs --masters=m1:2222,m2:2222,m3:2222 --ps=p1:2222,p2:2222

prints one line per task, masters first, then the ps:

  '<TF_CONFIG JSON>'<TAB>type:index host:port (what the task does)

Set each machine's TF_CONFIG to its line's JSON (without the quotes) and run the same
t2t-trainer command everywhere. Mapping: the first master is the "chief", the other
masters are "worker"s, the --ps are "ps". With --ps the cluster is for
ParameterServerStrategy (the chief is the coordinator; give 2+ masters), without it for
MultiWorkerMirroredStrategy (the chief trains too). --workers is an alias of --masters.
Unlike Tensor2Tensor's tool, --ps is optional, the lines carry no trainer flags (TF2's
trainer takes its role from TF_CONFIG), and the summary line goes to stderr.

A TFJob manifest (Kubeflow training operator, kubeflow.org/v1) for `kubectl apply -f -`:

  t2t-make-tf-configs --tfjob --name=NAME --image=IMAGE --num_workers=N [--num_ps=M] \\
      [--chief] [--gpus_per_worker=G] [--namespace=NS] [--format=yaml|json] \\
      -- t2t-trainer --problem=... --model=...

prints the TFJob with tfReplicaSpecs Worker (+ Chief with --chief or --num_ps, + PS),
each `restartPolicy: OnFailure`, running the command after `--` in a container named
"tensorflow"; the operator sets every pod's TF_CONFIG.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from absl import flags

from t2t.bin import flag_help, t2t_flag_compat
from t2t.cluster import launch as launch_lib
from t2t.cluster import tf_config as tf_config_lib
from t2t.cluster import tfjob as tfjob_lib

FLAGS = flags.FLAGS

flags.DEFINE_string("masters", "", "Comma-separated host:port of the trainers: the first is "
                    "the chief, the others workers.")
flags.DEFINE_string("workers", "", "Alias of --masters.")
flags.DEFINE_string("ps", "", "Comma-separated host:port of the parameter servers.")
flags.DEFINE_bool("tfjob", False, "Print a Kubernetes TFJob manifest instead of TF_CONFIGs.")
flags.DEFINE_string("name", None, "--tfjob: the TFJob's name (DNS-1035 label).")
flags.DEFINE_string("image", None, "--tfjob: the container image holding t2t.")
flags.DEFINE_integer("num_workers", 1, "--tfjob: Worker replicas.")
flags.DEFINE_integer("num_ps", 0, "--tfjob: PS replicas (> 0 adds a Chief coordinator).")
flags.DEFINE_bool("chief", False, "--tfjob: a Chief replica besides the Workers.")
flags.DEFINE_integer("gpus_per_worker", 0, "--tfjob: nvidia.com/gpu limit of each "
                     "computing replica (Workers; the Chief without --num_ps).")
flags.DEFINE_string("namespace", None, "--tfjob: the Kubernetes namespace.")
flags.DEFINE_enum("format", "yaml", ["yaml", "json"], "--tfjob: manifest format.")

_TF_CONFIG_FLAGS = ("masters", "workers", "ps")
_TFJOB_FLAGS = ("name", "image", "num_workers", "num_ps", "chief", "gpus_per_worker",
                "namespace", "format")


def fail(message: str) -> NoReturn:
    """A clear error without a traceback, exit status 1 (common_flags.fail's twin, without
    the trainer flags that module defines)."""
    sys.stderr.write(f"error: {message}\n")
    sys.exit(1)


def _reject(names: tuple[str, ...], why: str) -> None:
    given = [f"--{n}" for n in names if FLAGS[n].present]
    if given:
        fail(f"{', '.join(given)} {why}")


def print_tf_configs() -> None:
    _reject(_TFJOB_FLAGS, "can only be used with --tfjob; TF_CONFIGs take --masters (or --workers) "
                          "and --ps.")
    if FLAGS.masters and FLAGS.workers:
        fail("give --masters or its alias --workers, not both.")
    flag = "--masters" if FLAGS.masters or not FLAGS.workers else "--workers"
    text = FLAGS.masters or FLAGS.workers
    if not text.strip():
        fail("--masters (or --workers) is required: comma-separated host:port, e.g. "
             "--masters=10.0.0.1:2222,10.0.0.2:2222 [--ps=10.0.0.3:2222].")
    try:
        masters = tf_config_lib.parse_addresses(text, flag)
        ps = tf_config_lib.parse_addresses(FLAGS.ps, "--ps")
        cluster = tf_config_lib.masters_cluster(masters, ps)
    except tf_config_lib.ClusterError as e:
        fail(str(e))
    if ps:
        summary = (f"ParameterServerStrategy: 1 chief (coordinator), {len(masters) - 1} "
                   f"worker(s), {len(ps)} parameter server(s)")
    else:
        summary = (f"MultiWorkerMirroredStrategy: 1 chief and {len(masters) - 1} worker(s), "
                   f"all training")
    sys.stderr.write(f"{summary}\n")
    for line in tf_config_lib.make_tf_configs(cluster):
        print(line)


def print_tfjob(command: list[str]) -> None:
    _reject(_TF_CONFIG_FLAGS, "cannot be used with --tfjob: the training operator assigns "
                              "addresses; give --num_workers and --num_ps.")
    try:
        layout = tf_config_lib.Layout(FLAGS.num_workers, FLAGS.num_ps, FLAGS.chief)
        manifest = tfjob_lib.tfjob_manifest(FLAGS.name or "", FLAGS.image or "", command,
                                            layout, FLAGS.gpus_per_worker, FLAGS.namespace)
    except (tf_config_lib.ClusterError, tfjob_lib.ManifestError) as e:
        fail(str(e))
    if FLAGS.format == "json":
        sys.stdout.write(tfjob_lib.to_json(manifest))
    else:
        sys.stdout.write(tfjob_lib.to_yaml(
            manifest, f"TFJob for the Kubeflow training operator ({layout.strategy}); "
                      f"apply with: kubectl apply -f FILE"))


def main(argv: list[str], command: list[str]) -> None:
    if len(argv) > 1:
        fail(f"unexpected arguments {argv[1:]}; flags look like --masters=host:port "
             f"(a --tfjob command goes after `--`).")
    if FLAGS.tfjob:
        print_tfjob(command)
    elif command:
        fail(f"a command after `--` ({' '.join(command)}) can only be used with --tfjob.")
    else:
        print_tf_configs()


def run() -> None:
    """Console-script entry point."""
    argv, command = launch_lib.split_command(sys.argv)
    t2t_flag_compat.accept_shared_flags("t2t-make-tf-configs")
    flag_help.run(lambda rest: main(rest, command), __doc__, argv=argv)


if __name__ == "__main__":
    run()
