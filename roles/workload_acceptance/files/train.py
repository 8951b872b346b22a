# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fixed-window training run with checkpoints (workload acceptance, steps 4 and 5).

    torchrun --nnodes=N --nproc-per-node=G --node-rank=$PET_NODE_RANK \
        --rdzv-backend=c10d --rdzv-endpoint=$PET_RDZV_ENDPOINT train.py \
        --data /data --checkpoint-dir /checkpoints --checkpoint-every 50 --seconds 300
    python3 train.py ...          (one process)

A small model trained with DistributedDataParallel (NCCL on GPUs, gloo on CPUs) on batches read
from the files on the data volume, so the run exercises the image, the GPUs, the collective
fabric and the checkpoint volume together; what it learns does not matter. Rank 0 prints one
JSON object per line:
  {"event": "resume", "step", "path", "seconds", "time"}     a checkpoint was loaded
  {"event": "start", "step": 0, "reason", "time"}            none was there
  {"event": "step", "step", "samples", "loss", "time"}       every step (samples: the global batch)
  {"event": "checkpoint", "step", "path", "bytes", "seconds", "time"}   every K steps
  {"event": "done", "step", "samples_total", "seconds", "time"}         the window is over, exit 0
  {"event": "failed", "error", "time"}                       cannot run (exit 2)
"""

import argparse
import json
import os
import re
import sys
import time

CHECKPOINT = re.compile(r"^step-(\d+)\.pt$")
FEATURES, CLASSES = 1024, 16


def emit(event, **fields):
    fields.update(event=event, time=round(time.time(), 3))
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def parse(argv):
    parser = argparse.ArgumentParser(description="Train a small model for a fixed window with checkpoints.")
    parser.add_argument("--data", required=True, help="directory with the staged data (read as training bytes)")
    parser.add_argument("--checkpoint-dir", required=True, help="where checkpoints are written and resumed from")
    parser.add_argument("--checkpoint-every", type=int, default=50, metavar="K", help="steps between checkpoints")
    parser.add_argument("--seconds", type=float, required=True, help="length of the training window")
    parser.add_argument("--batch-size", type=int, default=64, help="samples per process and step")
    parser.add_argument("--keep", type=int, default=2, help="checkpoints kept in the directory")
    args = parser.parse_args(argv)
    if args.checkpoint_every < 1 or args.seconds <= 0 or args.batch_size < 1 or args.keep < 1:
        parser.error("--checkpoint-every, --batch-size and --keep must be >= 1 and --seconds > 0")
    return args


def checkpoints(directory):
    """[(step, path)] of the checkpoints in the directory, newest first."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = [(int(m.group(1)), os.path.join(directory, n)) for n in names for m in [CHECKPOINT.match(n)] if m]
    return sorted(found, reverse=True)


def data_files(directory):
    out = []
    for root, _dirs, names in os.walk(directory):
        out += [os.path.join(root, n) for n in sorted(names) if not n.endswith(".part")]
    return sorted(p for p in out if os.path.getsize(p) > 0)


class Batches:
    """Endless batches from the bytes of the data files (features: bytes / 255; label: a byte mod CLASSES)."""

    def __init__(self, files, rank, world, batch_size):
        self.files = files
        self.size = batch_size * (FEATURES + 1)
        self.file, self.offset = rank % max(1, len(files)), rank * self.size
        self.stride = world * self.size

    def next_bytes(self):
        if not self.files:
            return os.urandom(self.size)
        path = self.files[self.file]
        with open(path, "rb") as handle:
            handle.seek(self.offset)
            block = handle.read(self.size)
        self.offset += self.stride
        if len(block) < self.size:      # end of this file: the next one from its start
            self.file, self.offset = (self.file + 1) % len(self.files), 0
            block += os.urandom(self.size - len(block))
        return block


def main(argv=None):
    args = parse(argv)
    try:
        import torch
        import torch.distributed as dist
        from torch import nn
        from torch.nn.parallel import DistributedDataParallel
    except ImportError as exc:
        emit("failed", error="torch is not importable (%s): run train.py in the training image (PyTorch)" % exc)
        return 2

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group(backend="nccl" if cuda else "gloo")
    say = emit if rank == 0 else (lambda *a, **k: None)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                          nn.Linear(2048, CLASSES)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = 0
    found = checkpoints(args.checkpoint_dir)
    began = time.monotonic()
    for number, path in found:
        try:
            state = torch.load(path, map_location=device)
        except Exception as exc:  # a checkpoint cut short by a killed pod: try the one before
            say("checkpoint-unreadable", step=number, path=path, error=str(exc))
            continue
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = int(state["step"])
        say("resume", step=step, path=path, seconds=round(time.monotonic() - began, 3))
        break
    else:
        say("start", step=0, reason="no checkpoint in %s" % args.checkpoint_dir)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None) if world > 1 else model
    batches = Batches(data_files(args.data), rank, world, args.batch_size)
    loss_fn = nn.CrossEntropyLoss()
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    started = time.monotonic()
    samples_total = 0
    while True:
        stop = torch.tensor([1 if time.monotonic() - started >= args.seconds else 0], device=device)
        if world > 1:
            dist.broadcast(stop, 0)     # every rank stops after the same step
        if stop.item():
            break
        raw = torch.frombuffer(bytearray(batches.next_bytes()), dtype=torch.uint8).view(args.batch_size, FEATURES + 1)
        inputs = (raw[:, :FEATURES].float() / 255.0).to(device)
        labels = (raw[:, FEATURES].long() % CLASSES).to(device)
        optimizer.zero_grad()
        loss = loss_fn(ddp(inputs), labels)
        loss.backward()
        optimizer.step()
        step += 1
        samples_total += args.batch_size * world
        say("step", step=step, samples=args.batch_size * world, loss=round(float(loss.item()), 5))
        if step % args.checkpoint_every == 0:
            if rank == 0:
                save(torch, args, model, optimizer, step, say)
            if world > 1:
                dist.barrier()
    say("done", step=step, samples_total=samples_total, seconds=round(time.monotonic() - started, 3))
    if world > 1:
        dist.destroy_process_group()
    return 0


def save(torch, args, model, optimizer, step, say):
    """Write to a temporary name and rename: a pod killed while writing leaves the previous checkpoint."""
    path = os.path.join(args.checkpoint_dir, "step-%08d.pt" % step)
    began = time.monotonic()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, path + ".tmp")
    with open(path + ".tmp", "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
    say("checkpoint", step=step, path=path, bytes=os.path.getsize(path), seconds=round(time.monotonic() - began, 3))
    for _step, old in checkpoints(args.checkpoint_dir)[args.keep:]:
        os.remove(old)


if __name__ == "__main__":
    sys.exit(main())
