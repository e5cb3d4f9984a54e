"""A tiny GPT-style language-model training whose log bench reads: torchtitan's step lines on rank 0.

Run it under bench, on the CPU, with two data-parallel ranks (Gloo)::

    bench run -- torchrun --nproc-per-node 2 runner/examples/llm_train.py --steps 20
    bench run --launcher mpirun --np 2 -- python runner/examples/llm_train.py --steps 20
    bench run --launcher slurm --np 2 -- python runner/examples/llm_train.py --steps 20   # inside salloc

or alone (one rank): ``bench run -- python runner/examples/llm_train.py``. It trains a small decoder-only
transformer (defined with torch.nn only) on random tokens, data-parallel when torchrun starts it, and prints
what torchtitan prints, so that ``bench.ingest.formats.torchtitan`` reads it:

- ``world_size=N`` and ``Model tiny-gpt size: P total parameters``;
- ``Trainer is initialized with local batch size B, global batch size G, gradient accumulation steps 1,
  sequence length S, total steps T (warmup 0)``;
- one ``step: i  loss: L  memory: 0.00GiB(0.00%)  tps: T  tflops: F`` line per ``--log-every`` steps, where
  ``tps`` is this rank's tokens per second over the interval (torchtitan's per-device figure) and ``tflops``
  is 6 x parameters x tps / 1e12 (the dense-transformer estimate of training FLOPs per token); no ``mfu``,
  since a CPU has no peak this script could state;
- ``Training completed`` at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, seq: int):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab, dim), nn.Parameter(torch.zeros(seq, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(x)


#: (world size, rank) variables of the launchers: torchrun, Open MPI's mpirun, Slurm's srun.
LAUNCHERS = (("WORLD_SIZE", "RANK"), ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"), ("SLURM_NTASKS", "SLURM_PROCID"))


def launched() -> tuple[int, int]:
    """This process's world size and rank, as the launcher that started it says (1, 0 when run alone). Gloo
    meets at MASTER_ADDR:MASTER_PORT: torchrun sets them; under mpirun or srun they default to this host
    and port 29533 (set MASTER_ADDR to the first host when the ranks span several)."""
    for size, rank in LAUNCHERS:
        if size in os.environ and rank in os.environ:
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29533")
            return int(os.environ[size]), int(os.environ[rank])
    return 1, 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8, help="sequences per rank")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--log-every", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads per rank")
    args = ap.parse_args(argv)
    if min(args.steps, args.batch_size, args.seq_len, args.dim, args.layers, args.vocab, args.log_every) < 1:
        ap.error("every size must be positive")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    world, rank = launched()
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    model: nn.Module = TinyGPT(args.vocab, args.dim, args.layers, heads=4, seq=args.seq_len)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(rank)

    def say(text: str) -> None:
        if rank == 0:
            print(text, flush=True)

    say(f"world_size={world}")
    say(f"Model tiny-gpt size: {params:,} total parameters")
    say(f"Trainer is initialized with local batch size {args.batch_size}, global batch size "
        f"{args.batch_size * world}, gradient accumulation steps 1, sequence length {args.seq_len}, total steps "
        f"{args.steps} (warmup 0)")
    last, tokens = time.perf_counter(), 0
    for step in range(1, args.steps + 1):
        batch = torch.randint(0, args.vocab, (args.batch_size, args.seq_len + 1), generator=gen)
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, args.vocab), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tokens += args.batch_size * args.seq_len
        if step % args.log_every == 0 or step == 1 or step == args.steps:
            now = time.perf_counter()
            tps = tokens / (now - last)
            say(f"step: {step:2d}  loss: {float(loss.detach()):7.4f}  memory:  0.00GiB(0.00%)  tps: {round(tps):,}  "
                f"tflops: {6 * params * tps / 1e12:.4f}")
            last, tokens = now, 0
    say("Training completed")
    if world > 1:
        # Gloo aborts the process ("terminate called without an active exception") when its group is destroyed
        # while DDP's reducer still holds it or a peer is still in its last collective: drop the model first, and
        # leave together.
        del model, opt
        dist.barrier()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    status = main()
    # Skip the interpreter's teardown: with torch 2.13 on the CPU, Gloo's worker threads can still be alive when
    # Python finalises, and then about one run in ten aborts ("terminate called without an active exception")
    # after it has finished and logged everything.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
