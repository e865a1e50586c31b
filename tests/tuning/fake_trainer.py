"""A stand-in for t2t-trainer in the fast tuner tests (no TensorFlow).

Reads --output_dir, --train_steps and --hparams (x, layers, beta, mode, ...), records its
pid and the hparams it got, then writes one eval line per step into eval_results.jsonl:
score = (1 - (x - 0.3)^2 + 0.01 * layers) * step / train_steps. mode=crash exits 3.
FAKE_DELAY (seconds, default 0.05) is the time per step.
"""

import json
import os
import sys
import time

flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
out = flags["output_dir"]
hparams = dict(p.split("=", 1) for p in flags.get("hparams", "").split(",") if p)
steps = int(flags.get("train_steps", "3"))
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "received.json"), "w") as f:
    json.dump({"pid": os.getpid(), "hparams": hparams, "argv": sys.argv[1:]}, f)
print(f"fake trainer: {hparams}", flush=True)
if hparams.get("mode") == "crash":
    print("Traceback (most recent call last):\nValueError: boom: mode=crash", flush=True)
    sys.exit(3)
x, layers = float(hparams.get("x", 0.3)), int(hparams.get("layers", 1))
final = 1 - (x - 0.3) ** 2 + 0.01 * layers
for step in range(1, steps + 1):
    time.sleep(float(os.environ.get("FAKE_DELAY", "0.05")))
    score = final * step / steps
    with open(os.path.join(out, "eval_results.jsonl"), "a") as f:
        f.write(json.dumps({"step": step, "score": score, "loss": 1 - score}) + "\n")
