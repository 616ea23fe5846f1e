"""Run a dnnpart plan as a ``torch.distributed.pipelining`` pipeline, one process per stage.

``dnnpart export PLAN --format pipelining -o DIR`` copies this file to ``DIR/run_pipeline.py``
beside ``plan.json`` (the plan) and ``launch.json`` (which rank runs which stage on which
device); launch it from ``DIR`` with::

    CUDA_VISIBLE_DEVICES=<launch.json> torchrun --nproc-per-node S run_pipeline.py [--steps N] [--check]

(on CPU, gloo, without ``CUDA_VISIBLE_DEVICES``). Rank ``r`` runs stage ``r`` on the plan's
device for stage ``r``: ``CUDA_VISIBLE_DEVICES`` lists those devices in stage order, so each
rank's ``cuda:LOCAL_RANK`` is its planned device.

1. **Model.** dnnpart rebuilds the model from ``plan.json``'s model block, as ``dnnpart run``
   does (:func:`dnnpart.workflow.loading.rebuild_model`: the same spec, seeded weights, input
   shapes and dtype); nothing in the plan file runs, it is read as JSON data. A ``module:``
   spec is followed only where the export was told to (``--model``/``--trust-plan``, kept in
   ``launch.json``).
2. **Split.** ``torch.distributed.pipelining.pipeline()`` with ``SplitPoint.BEGINNING`` at the
   plan's cut points (``launch.json``'s ``split_spec``, block paths). Where ``pipeline()``
   cannot trace the model, builds another number of stages, or the plan cuts inside a module,
   dnnpart's own stage modules run instead (:func:`dnnpart.workflow.running.pipeline_program`,
   what ``dnnpart run`` runs: :func:`dnnpart.export.stages.split_module` of the captured
   graph, each stage carrying the values later stages need). ``--split`` forces either.
3. **Steps.** ``--steps`` steps of the plan's schedule (``Schedule1F1B``/``ScheduleGPipe``)
   over its micro-batches: micro-batch ``i`` of step ``s`` is dnnpart's seeded example input
   (seed ``s * M + i + 1``); the loss is the mean squared error of the model's first
   floating-point output against a seeded random target (:func:`target_for`), averaged over
   micro-batches; then one optimizer step (the plan's ``adam``, else SGD, ``--lr``). A
   parameter held by several stages (tied embeddings) gets the sum of their gradients on
   every copy before the update, so the copies stay equal. The last rank prints each step's
   loss. The model runs as it was captured (``eval`` mode: no dropout, batch norm with its
   running statistics).
4. **Check** (``--check``). The last rank runs the same steps on the unpartitioned model and
   compares every step's micro-batch losses and every parameter gradient (summed over the
   stages holding it) relative to the largest reference value, tolerance
   :data:`dnnpart.export.training_run.RTOL`; exit 1 on a mismatch.

Inference plans run forward only (``ScheduleGPipe`` without a loss: GPipe and 1F1B order
forward-only micro-batches alike); ``--check`` compares the outputs. Exit status: 0; 1 when
the check fails; 2 when the launch does not fit the plan (one ``error:`` line).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SPLITS = ("auto", "pipeline", "manual")


class LaunchError(Exception):
    """The launch does not fit the plan (exit 2, one line)."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The script's options."""
    p = argparse.ArgumentParser(
        prog="run_pipeline.py",
        description="Run a dnnpart plan under torch.distributed.pipelining: "
                    "torchrun --nproc-per-node S run_pipeline.py (S: the plan's stages)")
    p.add_argument("--steps", type=_positive, default=1, help="training steps (default 1)")
    p.add_argument("--check", action="store_true",
                   help="compare losses and gradients (outputs, for inference) with the "
                        "unpartitioned model; exit 1 on a mismatch")
    p.add_argument("--split", choices=SPLITS, default="auto",
                   help="pipeline: torch's pipeline() at the plan's split points; manual: "
                        "dnnpart's stage modules; auto (default): pipeline() where it builds "
                        "the plan's stages, else manual")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (default 1e-3)")
    p.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent,
                   help="folder with plan.json and launch.json (default: this script's)")
    return p.parse_args(argv)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def read_launch(folder: Path, world: int) -> dict[str, Any]:
    """``launch.json``, checked against the process group's size."""
    path = folder / "launch.json"
    try:
        launch: dict[str, Any] = json.loads(path.read_text())
        stages = launch["stages"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LaunchError(f"{path}: cannot read the launch ({exc})") from None
    if world != len(stages):
        raise LaunchError(
            f"the plan has {len(stages)} stages; launch one process per stage: torchrun "
            f"--nproc-per-node {len(stages)} run_pipeline.py (this launch has {world})")
    return launch


def microbatch(source: Any, step: int, index: int, n_micro: int) -> tuple[Any, ...]:
    """Micro-batch ``index`` of step ``step``: dnnpart's seeded example inputs (``dnnpart run``'s
    for step 0)."""
    from dnnpart.frontends.sources import example_inputs

    return tuple(example_inputs(source.input_shapes, source.input_dtype,
                                seed=step * n_micro + index + 1, module=source.module))


def target_for(out: Any, step: int, index: int, n_micro: int) -> Any:
    """The seeded random target of micro-batch ``index`` of step ``step`` (``out``'s shape)."""
    import torch

    gen = torch.Generator().manual_seed(10_000 + step * n_micro + index)
    return torch.randn(tuple(out.shape), generator=gen, dtype=out.dtype).to(out.device)


def loss_of(out: Any, step: int, index: int, n_micro: int) -> Any:
    """Mean squared error of the model's main output against :func:`target_for`."""
    import torch

    from dnnpart.export.training_run import main_output

    main = main_output(out)
    if main is None:
        raise LaunchError("the model's output has no floating-point tensor to train on")
    return torch.nn.functional.mse_loss(main, target_for(main, step, index, n_micro))


def make_optimizer(params: list[Any], name: str | None, lr: float) -> Any:
    """The plan's optimizer (``adam``), else SGD; ``None`` for a stage without parameters (a
    stage of masks and position tables has nothing to update)."""
    import torch

    if not params:
        return None
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.SGD(params, lr=lr)


# -- building this rank's stage ---------------------------------------------------------------


def pipeline_stage(source: Any, launch: dict[str, Any], rank: int, device: Any,
                   example: tuple[Any, ...]) -> Any:
    """Stage ``rank`` split by ``torch.distributed.pipelining.pipeline()`` at the plan's split
    points; raises :class:`LaunchError` where that does not build the plan's stages."""
    import warnings

    from torch.distributed.pipelining import SplitPoint, pipeline

    from dnnpart.export.on_device import retarget

    spec = launch.get("split_spec")
    if not spec:
        raise LaunchError(launch.get("split_note") or "the plan has no split points")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe = pipeline(source.module, mb_args=example,
                        split_spec={path: SplitPoint.BEGINNING for path in spec})
    if pipe.num_stages != len(launch["stages"]):
        raise LaunchError(f"pipeline() built {pipe.num_stages} stages for the plan's "
                          f"{len(launch['stages'])}")
    _check_no_skips(pipe.split_gm)
    if device.type == "cpu":
        _check_contiguous(pipe.split_gm, example)
    retarget(pipe.get_stage_module(rank), device)
    return pipe.build_stage(rank, device)


def _check_no_skips(split_gm: Any) -> None:
    """Raise :class:`LaunchError` where a value of ``pipeline()``'s split skips a stage (a
    rotary table stage 0 builds and every later block reads): its schedules cannot run the
    backward of skip connections, so dnnpart's stage modules (which carry such values through
    the stages between) run instead."""
    stages = [n for n in split_gm.graph.nodes if n.op == "call_module"]
    index = {n.name: i for i, n in enumerate(stages)}

    def readers(node: Any) -> list[int]:
        found: list[int] = []
        for user in node.users:
            if user.op == "call_module":
                found.append(index[user.name])
            elif user.op == "call_function":  # getitem of a stage's tuple output
                found += readers(user)
        return found

    for n in split_gm.graph.nodes:
        first = index.get(n.name, -1) + 1 if n.op == "call_module" else 0
        if n.op in ("call_module", "placeholder") and any(i > first for i in readers(n)):
            raise LaunchError(f"pipeline()'s split passes {n.name!r} past a stage (a skip "
                              "connection), whose backward its schedules do not run")


def _check_contiguous(split_gm: Any, example: tuple[Any, ...]) -> None:
    """Raise :class:`LaunchError` where a stage of ``pipeline()``'s split would send a
    non-contiguous tensor (a transposed view between BERT's blocks): gloo sends contiguous
    tensors only, so dnnpart's stage modules (which send copies) run instead."""
    import torch

    sent: list[tuple[str, Any]] = []

    class Recorder(torch.fx.Interpreter):
        def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
            out = super().call_module(target, args, kwargs)
            sent.append((str(target), out))
            return out

    with torch.no_grad():
        Recorder(split_gm).run(*example)
    for name, out in sent[:-1]:  # the last stage's output stays on its rank
        values = out if isinstance(out, tuple) else (out,)
        if any(isinstance(v, torch.Tensor) and not v.is_contiguous() for v in values):
            raise LaunchError(f"pipeline()'s {name} sends a non-contiguous tensor, which gloo refuses")


def manual_stage(plan: Path, launch: dict[str, Any], rank: int, device: Any,
                 example: tuple[Any, ...]) -> Any:
    """Stage ``rank`` from dnnpart's own stage modules, as ``dnnpart run`` builds them."""
    from dnnpart.workflow.applying import program_stage
    from dnnpart.workflow.loading import load_planned_model
    from dnnpart.workflow.running import pipeline_program

    planned = load_planned_model(plan, model=launch.get("model"), trust=bool(launch.get("trust_plan")))
    program, _ = pipeline_program(planned, str(plan))
    ran = [planned.problem.cluster.devices[s.device].name for s in program.stages]
    wanted = [s["device"] for s in launch["stages"]]
    if ran != wanted:
        raise LaunchError(f"the stage modules run on {', '.join(ran)}, launch.json says "
                          f"{', '.join(wanted)}; export the plan again")
    return program_stage(program, rank, device, example)


def build_stage(args: argparse.Namespace, launch: dict[str, Any], source: Any, rank: int,
                device: Any, say: Any) -> tuple[Any, str]:
    """This rank's ``PipelineStage`` and how it was split (``pipeline()`` or ``manual``).

    Every rank takes the same way: ``pipeline()`` is tried where asked, and where it fails on
    any rank all ranks build dnnpart's stage modules.
    """
    import torch.distributed as dist

    example = microbatch(source, 0, 0, int(launch["microbatches"]))
    plan = args.dir / launch.get("plan", "plan.json")
    if args.split == "manual":
        return manual_stage(plan, launch, rank, device, example), "dnnpart's stage modules"
    stage, why = None, ""
    try:
        stage = pipeline_stage(source, launch, rank, device, example)
    except Exception as exc:  # tracing fails in many ways (dynamic control flow, HF models)
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    failed: list[str] = [""] * dist.get_world_size()
    dist.all_gather_object(failed, why)
    why = next((w for w in failed if w), "")
    if stage is not None and not why:
        return stage, "pipeline()"
    if args.split == "pipeline":
        raise LaunchError(f"pipeline() cannot split this plan: {why}")
    say(f"pipeline() does not build the plan's stages ({why}); running dnnpart's stage modules")
    return manual_stage(plan, launch, rank, device, example), "dnnpart's stage modules"


# -- one step -----------------------------------------------------------------------------------


def stage_parameters(stage: Any) -> list[tuple[str, Any]]:
    """The stage module's parameters (dnnpart's stage modules wrap the stage as ``inner``)."""
    module = stage.submod
    module = getattr(module, "inner", module)
    return list(module.named_parameters())


def local_gradients(params: list[tuple[str, Any]], alias: dict[str, str]) -> dict[str, Any]:
    """This rank's gradients by canonical name (copies of one tied tensor summed)."""
    grads: dict[str, Any] = {}
    for name, p in params:
        if p.grad is None:
            continue
        key = alias.get(name, name)
        g = p.grad.detach().cpu().clone()
        grads[key] = g if key not in grads else grads[key] + g
    return grads


def sync_tied(params: list[tuple[str, Any]], alias: dict[str, str], shapes: dict[str, Any],
              device: Any) -> None:
    """Sum the gradient of every parameter held more than once (over ranks, or twice in one
    stage) onto each copy, so that the copies stay equal after the update."""
    import torch
    import torch.distributed as dist

    mine: dict[str, int] = {}
    for name, _ in params:
        key = alias.get(name, name)
        mine[key] = mine.get(key, 0) + 1
    counts: list[dict[str, int]] = [{} for _ in range(dist.get_world_size())]
    dist.all_gather_object(counts, mine)
    total: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    for key in sorted(k for k, v in total.items() if v > 1):
        held = [p for n, p in params if alias.get(n, n) == key]
        buf = torch.zeros(shapes[key], device=device)
        for p in held:
            if p.grad is not None:
                buf += p.grad.detach().to(device)
        dist.all_reduce(buf)
        for p in held:
            p.grad = buf.to(p.dtype).clone()


class Reference:
    """The unpartitioned model stepping beside the pipeline (``--check``, last rank)."""

    def __init__(self, module: Any, optimizer: str | None, lr: float) -> None:
        from dnnpart.export.training_run import canonical_names

        self.module = module
        self.alias = canonical_names(module)
        self.optimizer = make_optimizer(list(module.parameters()), optimizer, lr)

    def train_step(self, batches: list[tuple[Any, ...]], step: int) -> tuple[list[float], dict[str, Any]]:
        """Micro-batch losses and the mean-loss gradients, then the update."""
        self.optimizer.zero_grad(set_to_none=True)
        losses = [loss_of(self.module(*mb), step, i, len(batches)) for i, mb in enumerate(batches)]
        (sum(losses) / len(losses)).backward()
        grads = {self.alias[n]: p.grad.detach().clone()
                 for n, p in self.module.named_parameters() if p.grad is not None}
        self.optimizer.step()
        return [float(x.detach()) for x in losses], grads

    def forward(self, batches: list[tuple[Any, ...]]) -> Any:
        """The main output of every micro-batch, concatenated."""
        import torch

        from dnnpart.export.training_run import main_output

        with torch.no_grad():
            return torch.cat([main_output(self.module(*mb)) for mb in batches])


# -- main -------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the plan (see the module docstring); returns the exit status."""
    args = parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        launch = read_launch(args.dir, world)
    except LaunchError as exc:
        if rank == 0:
            print(f"error: {exc}", file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = False  # the check compares float32 results
        torch.backends.cudnn.allow_tf32 = False
    else:
        from dnnpart.export.allocator import keep_freed_heap

        keep_freed_heap()  # a CPU rank: the heap the cost model prices
    if args.check:
        # CPU kernels pick their reduction order by thread count; the reference runs alike
        torch.set_num_threads(1)
    dist.init_process_group("nccl" if cuda else "gloo")
    try:
        return _run(args, launch, rank, world, device)
    except LaunchError as exc:
        print(f"error: rank {rank}: {exc}", file=sys.stderr)
        return 2
    finally:
        dist.destroy_process_group()


def _run(args: argparse.Namespace, launch: dict[str, Any], rank: int, world: int, device: Any) -> int:
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe

    from dnnpart.export.training_run import canonical_names
    from dnnpart.workflow.loading import rebuild_model

    last = rank == world - 1
    n_micro = int(launch["microbatches"])
    training = bool(launch["training"])
    plan = args.dir / launch.get("plan", "plan.json")

    def say(line: str) -> None:
        if rank == 0:
            print(line, flush=True)

    def rebuild() -> Any:
        return rebuild_model(plan, model=launch.get("model"), trust=bool(launch.get("trust_plan")))

    source = rebuild()
    alias = canonical_names(source.module)
    shapes = {alias[n]: tuple(p.shape) for n, p in source.module.named_parameters(remove_duplicate=False)}
    stage, how = build_stage(args, launch, source, rank, device, say)
    me = launch["stages"][rank]
    print(f"rank {rank}: stage {rank} on {me['device']} ({device}), split by {how}", flush=True)
    dist.barrier()
    schedule = launch["schedule"] if training else "gpipe"
    say(f"{world} stages, schedule {schedule}, {n_micro} micro-batches, "
        f"{'training' if training else 'inference'}, {args.steps} step(s)")
    cls = Schedule1F1B if schedule == "1f1b" else ScheduleGPipe
    params = stage_parameters(stage)
    reference = Reference(rebuild().module, launch.get("optimizer"), args.lr) if args.check and last else None
    failed = False
    if training:
        step_box = [0]

        def loss_fn(out: Any, index: Any) -> Any:
            return loss_of(out, step_box[0], int(index.reshape(-1)[0]), n_micro)

        sched = cls(stage, n_microbatches=n_micro, loss_fn=loss_fn)
        optimizer = make_optimizer([p for _, p in params], launch.get("optimizer"), args.lr)
    else:
        sched = ScheduleGPipe(stage, n_microbatches=n_micro)
    for step in range(args.steps):
        batches = [microbatch(source, step, i, n_micro) for i in range(n_micro)]
        whole = tuple(torch.cat([mb[j] for mb in batches]).to(device) for j in range(len(batches[0])))
        if not training:
            with torch.no_grad():
                out = sched.step(*whole) if rank == 0 else sched.step()
            if last:
                failed |= _report_inference(step, out, reference, batches)
            continue
        step_box[0] = step
        for p in (p for _, p in params):
            p.grad = None
        losses: list[Any] = []
        kwargs: dict[str, Any] = {}
        if last:  # the target carries each micro-batch's index (chunked like the inputs)
            kwargs = {"target": torch.arange(n_micro, device=device), "losses": losses}
        if rank == 0:
            sched.step(*whole, **kwargs)
        else:
            sched.step(**kwargs)
        grads: list[dict[str, Any]] = [{} for _ in range(world)]
        if args.check:
            dist.all_gather_object(grads, local_gradients(params, alias))
        sync_tied(params, alias, shapes, device)
        if optimizer is not None:
            optimizer.step()
        if last:
            values = [float(x.detach()) for x in losses]
            print(f"step {step + 1}: loss {sum(values) / len(values)!r}", flush=True)
            if reference is not None:
                failed |= _report_training(step, values, grads, reference, batches)
    verdict = [failed]
    dist.broadcast_object_list(verdict, src=world - 1)
    # every rank done before any tears its connections down: a gloo peer that closes first
    # can abort the other's process (seen once: SIGABRT after a passed check), as the other
    # runtimes (export.runtime, export.training_run) wait too
    dist.barrier()
    return 1 if verdict[0] else 0


def _report_training(step: int, losses: list[float], grads: list[dict[str, Any]],
                     reference: Reference, batches: list[tuple[Any, ...]]) -> bool:
    """Print the check of one training step; whether it failed."""
    from dnnpart.export.training_run import RTOL, gradient_difference

    ref_losses, ref_grads = reference.train_step(batches, step)
    merged: dict[str, Any] = {}
    for part in grads:
        for k, g in part.items():
            merged[k] = g if k not in merged else merged[k] + g
    diff, scale, worst = gradient_difference(merged, ref_grads)
    loss_diff = max(abs(a - b) for a, b in zip(losses, ref_losses, strict=True))
    loss_scale = max(abs(x) for x in ref_losses) or 1.0
    rel = diff / scale if scale else diff
    ok = rel <= RTOL and loss_diff / loss_scale <= RTOL
    print(f"check step {step + 1}: {'passed' if ok else 'FAILED'}: unpartitioned loss "
          f"{sum(ref_losses) / len(ref_losses)!r}, losses differ by at most {loss_diff:.3g}; "
          f"{len(ref_grads)} parameter gradients, max |pipelined - unpartitioned| = {diff:.3g} "
          f"({rel:.3g} x max |grad|, worst {worst}), tolerance {RTOL:g}", flush=True)
    return not ok


def _report_inference(step: int, out: Any, reference: Reference | None,
                      batches: list[tuple[Any, ...]]) -> bool:
    """Print one forward step (and its check); whether the check failed."""
    from dnnpart.export.training_run import RTOL, main_output

    main = main_output(out).detach().cpu()
    print(f"step {step + 1}: output {tuple(main.shape)}, mean {float(main.double().mean())!r}", flush=True)
    if reference is None:
        return False
    ref = reference.forward(batches)
    diff = float((main.double() - ref.double()).abs().max())
    scale = float(ref.double().abs().max()) or 1.0
    ok = diff / scale <= RTOL
    print(f"check step {step + 1}: {'passed' if ok else 'FAILED'}: max |pipelined - unpartitioned| "
          f"= {diff:.3g} ({diff / scale:.3g} x max |output|), tolerance {RTOL:g}", flush=True)
    return not ok


def exit_without_finalizing(code: int) -> None:
    """Flush the output and end the process without the interpreter's finalization.

    Called once the process group is destroyed and every line is printed: what finalization
    would still do here is destroy torch's and gloo's C++ objects, and on a loaded machine
    that has aborted a rank whose work was complete (SIGABRT, "terminate called without an
    active exception", after both checked steps passed: twice in about ten fresh test runs,
    once after a barrier before the teardown was added). The script writes no files.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_without_finalizing(main())
