"""Train an image classifier with DistributedDataParallel, and resume exactly after a crash.

Run it with torchrun (or `torchrig launch`, which picks the process count and thread defaults):

    torchrun --nproc-per-node 4 /workspace/examples/train_ddp.py                  # GPUs, resnet18
    torchrun --nproc-per-node 2 /workspace/examples/train_ddp.py --steps 100      # CPU: tiny
    torchrun --nproc-per-node 4 --max-restarts 3 /workspace/examples/train_ddp.py # survive crashes

Started again after a crash, it goes on from the newest good checkpoint in --checkpoint-dir,
mid-epoch, with optimizer, LR schedule, gradient scaler, sampler position and RNG states: on CPU
with a fixed seed the final weights equal those of a run that never stopped, bit for bit. Stopped
(SIGTERM from `docker compose stop`, Kubernetes or Slurm; Ctrl-C; SIGUSR1/SIGUSR2 as a
preemption notice), every rank finishes its step, they save that step together and exit with 75
(EX_TEMPFAIL): nothing is lost, and the same command carries on from there.

It reads top to bottom: settings, process group, data, model, optimizer, resume, loop.
"""

import argparse
import math
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchrig import checkpoint, data, distributed, models

# -----------------------------------------------------------------------------------------------
# Settings. Model and sizes suit the device: a GPU's, or a small model on a CPU, where a GPU's
# resnet18 at 224 px would take half a minute a step. What is given on the command line wins.

GPU_SIZES = {"model": "resnet18", "image_size": 224, "batch_size": 128}
CPU_SIZES = {"model": "tiny", "image_size": 32, "batch_size": 32}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="torchvision model name, or 'tiny' (default: by device)")
    p.add_argument("--data", type=Path, help="an ImageFolder directory (default: synthetic data)")
    p.add_argument("--synthetic-size", type=int, default=50_000, help="synthetic dataset length")
    p.add_argument("--num-classes", type=int, default=1000, help="classes of the synthetic data")
    p.add_argument("--image-size", type=int, help="default: 224 on a GPU, 32 on a CPU")
    p.add_argument("--batch-size", type=int, help="per process and micro-step (default: by device)")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-steps per optimizer step")
    p.add_argument("--steps", type=int, default=1000, help="optimizer steps of the whole run")
    p.add_argument("--lr", type=float, default=0.1, help="learning rate per 256 samples")
    p.add_argument("--warmup-steps", type=int, help="default: a tenth of --steps, at most 100")
    p.add_argument("--weight-decay", type=float, default=5e-5)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--amp", choices=["auto", "bf16", "fp16", "off"], default="auto")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--compile-mode", choices=["default", "reduce-overhead", "max-autotune"],
                   help="torch.compile's mode; implies --compile (default: default)")  # fmt: skip
    p.add_argument("--sync-bn", action="store_true", help="synchronise BatchNorm across ranks")
    p.add_argument("--fsdp", action="store_true", help="shard the model with FSDP2 (fully_shard)")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers per process")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", type=Path, default=Path("/checkpoints/train_ddp"))
    p.add_argument("--checkpoint-every", type=int, default=200, help="optimizer steps")
    p.add_argument("--keep", type=int, default=3, help="checkpoints to keep")
    p.add_argument("--log-every", type=int, default=20, help="throughput line every N steps")
    p.add_argument("--tensorboard-dir", type=Path, help="default: <checkpoint-dir>/tensorboard")
    p.add_argument("--save-final", type=Path, help="also write the final weights to this file")
    args = p.parse_args(argv)
    positive = ("synthetic_size", "num_classes", "image_size", "batch_size", "grad_accum", "steps")
    for name in (*positive, "checkpoint_every", "keep", "log_every"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup_steps is None:
        args.warmup_steps = min(100, args.steps // 10)
    if args.lr <= 0 or args.warmup_steps < 0:
        p.error("--lr must be > 0 and --warmup-steps >= 0")
    if args.compile_mode is not None:
        if args.compile is False:
            p.error(f"--compile-mode {args.compile_mode} needs torch.compile: drop --no-compile")
        args.compile = True
    if args.fsdp and args.compile_mode in ("reduce-overhead", "max-autotune"):
        # FSDP2 gathers and frees each unit's parameters around its compiled graph, under
        # hooks CUDA graphs cannot hold (pytorch/pytorch#127225).
        p.error(f"--compile-mode {args.compile_mode} records CUDA graphs, which PyTorch does not "
                "support under --fsdp (FSDP2): use --compile-mode default")  # fmt: skip
    if args.data is not None and not args.data.is_dir():
        p.error(f"--data {args.data}: not a directory")
    # Fail now, not at the first checkpoint an hour in.
    try:
        args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        p.error(f"--checkpoint-dir {args.checkpoint_dir}: cannot create it ({exc.strerror})")
    if not os.access(args.checkpoint_dir, os.W_OK):
        p.error(f"--checkpoint-dir {args.checkpoint_dir}: not writable by this user")
    return args


args = parse_args()

# On a CPU, torch would start one thread per core in every rank and the ranks would fight over
# the cores; torchrun/torchrig launch set OMP_NUM_THREADS for that, default 1.
threads = os.environ.get("OMP_NUM_THREADS", "1")
if not threads.isdigit() or int(threads) < 1:
    sys.exit(f"OMP_NUM_THREADS={threads!r}: expected a whole number of threads >= 1")
torch.set_num_threads(int(threads))

device_was_picked = args.device == "auto"
if device_was_picked:
    args.device = "cuda" if torch.cuda.is_available() else "cpu"
if args.device == "cuda" and not torch.cuda.is_available():
    sys.exit("--device cuda: CUDA is not available here (torch.cuda.is_available() is False)")
on_gpu = args.device == "cuda"
if args.sync_bn and not on_gpu:
    sys.exit("--sync-bn needs --device cuda: torch's SyncBatchNorm works only on GPUs")
# The GPU speed-ups are on by default on a GPU and off on a CPU, where they do not pay.
args.channels_last = on_gpu if args.channels_last is None else args.channels_last
args.compile = on_gpu if args.compile is None else args.compile
args.compile_mode = args.compile_mode or "default"
sized_for = GPU_SIZES if on_gpu else CPU_SIZES
picked = {name: value for name, value in sized_for.items() if getattr(args, name) is None}
for name, value in picked.items():
    setattr(args, name, value)
if args.workers is None:
    args.workers = min(8, (os.cpu_count() or 1) // torch.cuda.device_count()) if on_gpu else 0

# -----------------------------------------------------------------------------------------------
# Process group. torchrig's init survives torchrun restarts (see torchrig/train/distributed.py).

dist_info = distributed.init_distributed(args.device)
rank, world_size, is_main = dist_info.rank, dist_info.world_size, dist_info.is_main
device = torch.device("cuda", dist_info.local_rank) if on_gpu else torch.device("cpu")


def log(message: str) -> None:
    if is_main:
        print(message, flush=True)


if picked:
    chosen = " ".join(f"--{name.replace('_', '-')} {value}" for name, value in picked.items())
    found = "a GPU found" if on_gpu else "no GPU found"
    why = found if device_was_picked else f"--device {args.device}"
    log(f"sized for {'a GPU' if on_gpu else 'a CPU'} ({why}): {chosen}; flags override these")
if args.compile and args.compile_mode == "reduce-overhead" and not on_gpu:
    log("note: --compile-mode reduce-overhead compiles as default on a CPU: CUDA graphs need a GPU")

if on_gpu:
    torch.backends.cudnn.benchmark = True  # picks the fastest conv kernels for these shapes
    torch.backends.cuda.matmul.allow_tf32 = True  # fp32 matmuls on tensor cores
    torch.backends.cudnn.allow_tf32 = True
else:
    # Bitwise reproducible on CPU at no real cost; on GPUs deterministic kernels cost speed.
    torch.use_deterministic_algorithms(True)

# AMP: bf16 where the GPU has it (no loss scaling needed); fp16 with a GradScaler otherwise.
if args.amp == "auto":
    args.amp = ("bf16" if torch.cuda.is_bf16_supported() else "fp16") if on_gpu else "off"
amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "off": None}[args.amp]
autocast = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype is not None else nullcontext()
scaler_class = torch.amp.GradScaler
if args.fsdp:
    # Each rank sees only its shards' gradients: this scaler agrees on an overflow over all ranks,
    # so that all of them skip the same step.
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler as scaler_class
scaler = scaler_class(device.type, enabled=amp_dtype == torch.float16)

# -----------------------------------------------------------------------------------------------
# Data: a sampler that knows its position in the epoch, so a resume skips what was consumed.

if args.data is not None:
    try:
        tv = models.import_torchvision("--data (ImageFolder)")
    except models.TorchvisionUnavailable as exc:
        sys.exit(str(exc))
    t = tv.transforms
    augment = [t.RandomResizedCrop(args.image_size), t.RandomHorizontalFlip(), t.ToTensor()]
    normalize = t.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])  # ImageNet's statistics
    dataset = tv.datasets.ImageFolder(str(args.data), t.Compose([*augment, normalize]))
    args.num_classes = len(dataset.classes)
else:
    dataset = data.SyntheticImages(
        args.synthetic_size, args.image_size, args.num_classes, args.seed
    )
sampler = data.ResumableDistributedSampler(dataset, world_size, rank, seed=args.seed)
loader = DataLoader(
    dataset,
    batch_size=args.batch_size,
    sampler=sampler,
    num_workers=args.workers,
    pin_memory=on_gpu,
    # Workers outlive an epoch: the sampler runs in this process, so each epoch's new order
    # (and a resume's skip) still reaches them.
    persistent_workers=args.workers > 0,
    drop_last=False,  # the sampler already gives every rank the same number of samples
    # A stop signal is this process's to handle: one torchrun passes on to the worker's process
    # group would otherwise kill the loader workers, and their death the training loop.
    worker_init_fn=checkpoint.ignore_stop_signals,
)

# -----------------------------------------------------------------------------------------------
# Model. Seeded identically on every rank; DDP also broadcasts rank 0's weights at start.

torch.manual_seed(args.seed)
try:
    model = models.build_model(args.model, args.num_classes)
except (models.TorchvisionUnavailable, ValueError) as exc:
    sys.exit(str(exc))
if args.sync_bn:
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
# channels_last: the inputs always (cuDNN then picks its NHWC kernels), the weights under DDP
# too. FSDP2 refuses channels_last parameters (it shards flat), so there they stay contiguous.
input_format = torch.channels_last if args.channels_last else torch.preserve_format
model_format = input_format if not args.fsdp else torch.preserve_format
model = model.to(device, memory_format=model_format)
if args.fsdp:
    # Blocks of >= 1M parameters (fewer on a small model) become FSDP units, gathered only while
    # they run; each is compiled on its own before sharding. No mixed-precision policy: autocast
    # computes in bf16/fp16 as under DDP, and the parameters stay fp32. A policy's param_dtype
    # would cast BatchNorm's weights too, which its kernels refuse beside fp32 running statistics
    # ("expected scalar type BFloat16 but found Float"), and a unit of BatchNorms of their own
    # would break every compiled block's graph at each of them.
    units = distributed.unit_threshold(model)
    distributed.shard_model(model, min_unit_params=units, compile_units=args.compile)
    train_model = ddp_model = model
else:
    ddp_model = distributed.wrap_ddp(model, [dist_info.local_rank] if on_gpu else None)
    train_model = torch.compile(ddp_model, mode=args.compile_mode) if args.compile else ddp_model

# Per-rank seed for anything random from here on (augmentation, dropout).
torch.manual_seed(args.seed + rank)

# -----------------------------------------------------------------------------------------------
# Optimizer and LR: linear scaling with the global batch, linear warmup, then cosine decay.

global_batch = args.batch_size * args.grad_accum * world_size
peak_lr = args.lr * global_batch / 256
decay = [p for p in model.parameters() if p.ndim > 1]  # no weight decay on norms and biases
no_decay = [p for p in model.parameters() if p.ndim <= 1]
groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay}]
optimizer = torch.optim.SGD(groups, lr=peak_lr, momentum=0.9, nesterov=True)


def lr_factor(step: int) -> float:
    if step < args.warmup_steps:
        return (step + 1) / (args.warmup_steps + 1)
    progress = (step - args.warmup_steps) / max(1, args.steps - args.warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)

# -----------------------------------------------------------------------------------------------
# Resume from the newest good checkpoint in --checkpoint-dir, if any (every rank). The layout
# follows the model: a file per step from rank 0 (DDP), or a folder of every rank's shards (FSDP).

config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
# Anything else with state_dict() / load_state_dict() joins by name: extras={"ema": ema}.
state = checkpoint.TrainingState(
    model, optimizer, scheduler=scheduler, scaler=scaler, sampler=sampler, config=config
)
checkpoints = checkpoint.CheckpointManager(args.checkpoint_dir, keep=args.keep)
try:
    resumed = checkpoints.load_latest(state)  # weights, optimizer, LR, scaler, sampler, RNG
except checkpoint.CheckpointMismatch as exc:  # another run's folder: one line, no traceback
    theirs = (exc.saved_config.get("model"), exc.saved_config.get("num_classes"))
    if None not in theirs and theirs != (args.model, args.num_classes):
        why = (f"holds checkpoints of {theirs[0]} with {theirs[1]} classes, which do not fit "
               f"{args.model} with {args.num_classes} classes")  # fmt: skip
    else:  # the same model, so something else does not fit: the library says what
        why = f"holds no checkpoint this run can load ({exc})"
    if is_main:
        print(f"error: --checkpoint-dir {args.checkpoint_dir} {why}: pass a new --checkpoint-dir",
              file=sys.stderr)  # fmt: skip
    sys.exit(1)
step = resumed["step"] if resumed is not None else 0  # optimizer steps done
if resumed is not None:
    compared = ("model", "batch_size", "grad_accum", "lr", "seed", "steps")
    changed = [k for k in compared if resumed["config"].get(k) != config[k]]
    log(f"resuming from step {step} (epoch {sampler.epoch}, {sampler.consumed} samples into it)")
    if changed:
        log(f"warning: settings differ from the checkpoint's: {', '.join(changed)}")
else:
    log(f"no checkpoint in {args.checkpoint_dir}: starting from scratch")

# -----------------------------------------------------------------------------------------------
# Logging on rank 0 only: a progress bar on a terminal, a throughput line, TensorBoard scalars.

log(
    f"{args.model} on {world_size} x {device.type} ({dist_info.backend}), amp={args.amp}, "
    f"channels_last={args.channels_last}, compile={args.compile and args.compile_mode}, "
    f"fsdp={args.fsdp}, global batch {global_batch}, peak lr {peak_lr:.4g}, {len(dataset)} samples"
)
writer = progress = None
if is_main:
    from torch.utils.tensorboard import SummaryWriter
    from tqdm import tqdm

    # purge_step: a resumed run drops what the crashed one logged after its last checkpoint.
    tensorboard_dir = args.tensorboard_dir or args.checkpoint_dir / "tensorboard"
    writer = SummaryWriter(str(tensorboard_dir), purge_step=step or None)
    # Into a log file or a pipe (nohup, a scheduler, a notebook) a bar would write a redrawn frame
    # with a carriage return every 0.1 s; there the throughput lines are the progress report.
    quiet = not sys.stderr.isatty()
    progress = tqdm(total=args.steps, initial=step, unit="step", dynamic_ncols=True, disable=quiet)


def micro_batches():
    """Batches forever, epoch after epoch, starting where the sampler stands."""
    epoch = sampler.epoch
    while True:
        sampler.set_epoch(epoch)  # a new order per epoch (keeps the position when resuming)
        yield from loader
        epoch += 1


def gradient_sync(last_micro_step: bool):
    """All-reduce gradients only on the last micro-step of an accumulation (saves bandwidth)."""
    if args.fsdp:
        model.set_requires_gradient_sync(last_micro_step)
        return nullcontext()
    return nullcontext() if last_micro_step else ddp_model.no_sync()


# -----------------------------------------------------------------------------------------------
# The training loop. A step is one optimizer update; checkpoints land only between steps.
# SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 are noted, not obeyed at once: at the end of the
# step the ranks agree, save that step together and leave with checkpoint.RESUMABLE_EXIT.

batches = micro_batches()
train_model.train()
stop = checkpoint.StopSignals().install()
stopped = False
window_start, window_steps = time.perf_counter(), 0
while step < args.steps:
    loss_sum = torch.zeros((), device=device)
    for micro_step in range(args.grad_accum):
        images, labels = next(batches)
        images = images.to(device, non_blocking=True, memory_format=input_format)
        labels = labels.to(device, non_blocking=True)
        with gradient_sync(micro_step == args.grad_accum - 1):
            with autocast:
                loss = F.cross_entropy(train_model(images), labels) / args.grad_accum
            scaler.scale(loss).backward()
        loss_sum += loss.detach()
        sampler.advance(len(labels))
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    scheduler.step()
    if args.fsdp:
        # BatchNorm statistics: rank 0's on every rank, as DDP does, so a checkpoint (which
        # holds one rank's copy) resumes every rank where it was.
        distributed.broadcast_buffers(model)
    step += 1
    window_steps += 1

    if step % args.log_every == 0 or step == args.steps:
        # The mean over ranks; .item() also waits for the GPU: honest timings.
        mean_loss = distributed.all_reduce_mean(loss_sum).item()
        elapsed = time.perf_counter() - window_start
        samples_per_s = window_steps * global_batch / elapsed
        step_ms = 1000 * elapsed / window_steps
        if is_main:
            lr = scheduler.get_last_lr()[0]
            scalars = dict(loss=mean_loss, lr=lr, samples_per_s=samples_per_s, step_time_ms=step_ms)
            for name, value in scalars.items():
                writer.add_scalar(f"train/{name}", value, step)
            progress.set_postfix(loss=f"{mean_loss:.4f}", refresh=False)
            progress.write(
                f"step {step:6d} | loss {mean_loss:.4f} | lr {lr:.4g} | "
                f"{samples_per_s:8.1f} samples/s | {step_ms:7.1f} ms/step"
            )
        window_start, window_steps = time.perf_counter(), 0
    if is_main:
        progress.update(1)
    stopped = stop.agreed()  # every rank, every step: one all-reduce of one integer
    if stopped or step % args.checkpoint_every == 0 or step == args.steps:
        checkpoints.save(step, state)  # every rank; the epoch is the sampler's
        window_start = time.perf_counter()  # checkpoint time is not training throughput
    if stopped:
        break

# -----------------------------------------------------------------------------------------------
# Done: the final weights (plain names, no DDP/compile prefixes) for whoever needs them.

if args.save_final is not None and not stopped:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    # Collective for FSDP (gathers the shards); a plain copy for DDP.
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    final = get_model_state_dict(model, options=options)
    if is_main:
        args.save_final.parent.mkdir(parents=True, exist_ok=True)
        torch.save(final, args.save_final)
        log(f"final weights: {args.save_final}")
if is_main:
    progress.close()
    writer.close()
if stopped:
    cause = stop.received or "a stop signal on another rank"
    log(
        f"{cause}: saved step {step} in {args.checkpoint_dir}; exiting with "
        f"{checkpoint.RESUMABLE_EXIT} (stopped, resumable: the same command carries on from here)"
    )
else:
    log(f"finished {args.steps} steps; checkpoints in {args.checkpoint_dir}")
distributed.shutdown_distributed()
if stopped:
    checkpoint.exit_resumable()
