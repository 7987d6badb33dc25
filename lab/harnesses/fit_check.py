#!/usr/bin/env python3
"""Will it fit? `vrambench tune`'s minimum capacities checked against real
PyTorch (issue 23).

    python3 lab/harnesses/fit_check.py OUTDIR [--vrambench build/vrambench] [--budget-s 420] [--jobs 4]
                                       [--workloads transformer,cnn_amp,mlp_varbatch] [--settings CONF;CONF...]

On a GPU machine with torch (torchvision for cnn_amp); nothing is downloaded,
models are built from code and fed random data. It:

 1. records each workload under each allocator setting (defaults,
    max_split_size_mb:128, expandable_segments:True,
    roundup_power2_divisions:4), one fresh process each, memory history on
    from before the first allocation; each recording also measures what the
    process holds on the GPU besides PyTorch's reserved memory (the CUDA
    context, cuBLAS/cuDNN: total - free from cudaMemGetInfo, less
    memory_reserved(), less what the GPU had in use before: nvidia-smi);
 2. converts each snapshot (python/vrambench/torch2trace.py) and runs
    `vrambench tune` on it: the setting's min_capacity_bytes P, the smallest
    PyTorch limit from which up the replay fits under both placements of
    segments the sim models, and min_capacity_bytes_min L, the smaller of
    the two placements' (L = P where placement does not matter); and the
    sim's own verdict at each capacity tried below (`replay` under
    per_process_memory_fraction 0.5 of a sim twice as large: the limit to the
    byte; with --sim-placement top-down and rising: "fits" when both fit,
    "OOM" when neither does, "either" when they differ);
 3. runs each workload again, fresh process each, under
    torch.cuda.set_per_process_memory_fraction at the prediction P, at
    L - 2 MiB (the next limit down that can differ), L - 64 MiB and
    P + 64 MiB, and at L where L < P: out of memory or not,
    num_alloc_retries, num_ooms. PyTorch must fit at P and above and run out
    below L; between them the interval says either may happen. The
    fraction is chosen so that PyTorch's size_t(fraction x total) is P to the
    byte (the nearest double can be a byte short, and a limit one byte under
    the minimum runs out);
 4. the async backend (backend:cudaMallocAsync, which records no history: the
    defaults' trace): its limit counts the bytes handed out, so P is the
    requested peak; and its pool's real peak against tune's interval
    [min_device_bytes_min, max] (the GPU infinitely fast / as late as the
    trace allows).
Writes OUTDIR/fit-check.json and OUTDIR/fit-check.md (the table). Runs that
would start after --budget-s are skipped and listed; each process is killed
after 120 s. Exit status 0 when every check that ran agrees (the real outcome
is the sim's at every capacity where the sim gives one, and it fits at P), 1 otherwise, 2 for bad
arguments.
"""

import argparse
import concurrent.futures
import json
import math
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MiB = 1 << 20
WORKLOADS = ("transformer", "cnn_amp", "mlp_varbatch", "lstm_varlen", "unet_bf16")
# Models from the libraries a GPU machine may have (timm, transformers with peft, torch_geometric), built from
# code with random weights: run only when named with --workloads.
LIBRARY_WORKLOADS = ("vit_timm", "gpt2_lora", "gcn_pyg", "gpt2_generate")
SETTINGS = ("", "max_split_size_mb:128", "expandable_segments:True", "roundup_power2_divisions:4")
ASYNC = "backend:cudaMallocAsync"
# Capacities tried: (name, which end of the predicted interval [L, P], offset from it): at P, the next limit
# below L that can make another decision (limits and segments are whole 2 MiB pages), 64 MiB below L and above P,
# and L itself where L < P (inside the interval: no verdict, what PyTorch did is recorded).
POINTS = (("P", "max", 0), ("L - 2 MiB", "min", -2 * MiB), ("L - 64 MiB", "min", -64 * MiB),
          ("P + 64 MiB", "max", 64 * MiB), ("L", "min", 0))
PLACEMENTS = ("top-down", "rising")
PROCESS_TIMEOUT_S = 120
MAX_ENTRIES = 2_000_000


# --------------------------------------------------------------------------
# Workloads (in a worker process, torch imported)
# --------------------------------------------------------------------------

def train_step(loss, optimizer):
    """One optimizer step on `loss`, the gradients dropped after it (set_to_none: their memory is freed)."""
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def transformer_workload(torch, device):
    """A small decoder-only transformer (torch.nn only): 4 layers, 512 wide, 8 heads, vocabulary 8192, AdamW,
    12 steps of batch 8 at sequence lengths 64..512 (as a varying-length batch sampler gives them)."""
    torch.manual_seed(1)
    vocab, width, layers = 8192, 512, 4

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, width)
            self.position = torch.nn.Embedding(1024, width)
            layer = torch.nn.TransformerEncoderLayer(width, 8, 4 * width, dropout=0.0, batch_first=True,
                                                     norm_first=True)
            self.body = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = torch.nn.Linear(width, vocab)

        def forward(self, tokens):
            length = tokens.shape[1]
            positions = torch.arange(length, device=tokens.device)
            mask = torch.nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
            hidden = self.body(self.embed(tokens) + self.position(positions), mask=mask, is_causal=True)
            return self.head(hidden)

    model = Decoder().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lengths = [64, 512, 128, 384, 256, 512, 96, 448, 320, 160, 512, 224]
    generator = torch.Generator().manual_seed(2)
    for length in lengths:
        tokens = torch.randint(0, vocab, (8, length + 1), generator=generator).to(device)
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        train_step(loss, optimizer)
        del tokens, logits, loss
    return {"model": "decoder 4x512, vocab 8192", "batch": 8, "lengths": lengths, "optimizer": "AdamW"}


def cnn_amp_workload(torch, device):
    """torchvision ResNet-18 (weights=None) in mixed precision (autocast float16, GradScaler), SGD, 10 steps of
    32 images at 128..224 pixels."""
    import torchvision

    torch.manual_seed(1)
    torch.backends.cudnn.benchmark = False  # the same algorithms every run
    model = torchvision.models.resnet18(weights=None).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    sizes = [160, 224, 128, 192, 224, 160, 128, 224, 192, 160]
    generator = torch.Generator().manual_seed(2)
    for size in sizes:
        images = torch.randn(32, 3, size, size, generator=generator).to(device)
        labels = torch.randint(0, 1000, (32,), generator=generator).to(device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        del images, labels, loss
    return {"model": "torchvision resnet18(weights=None)", "batch": 32, "sizes": sizes, "amp": "float16"}


def mlp_varbatch_workload(torch, device):
    """An MLP (8 layers of 2048) trained on batches of varying size (64..4096), SGD, 20 steps."""
    torch.manual_seed(1)
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(2048, 2048), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(2048, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [256, 4096, 64, 1024, 3000, 512, 4096, 128, 2048, 777, 3500, 64, 1500, 4096, 300, 2500, 900, 4096,
               200, 1800]
    generator = torch.Generator().manual_seed(2)
    for batch in batches:
        inputs = torch.randn(batch, 2048, generator=generator).to(device)
        labels = torch.randint(0, 10, (batch,), generator=generator).to(device)
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        train_step(loss, optimizer)
        del inputs, labels, loss
    return {"model": "MLP 8x2048", "batches": batches, "optimizer": "SGD"}


def lstm_varlen_workload(torch, device):
    """A 2-layer LSTM language model (cuDNN's RNN: workspaces of odd sizes), 1024 wide, vocabulary 16384, Adam,
    14 steps at batches 16..64 and sequence lengths 32..400."""
    torch.manual_seed(1)
    torch.backends.cudnn.benchmark = False
    vocab, width = 16384, 1024

    class LanguageModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, width)
            self.rnn = torch.nn.LSTM(width, width, num_layers=2, batch_first=True)
            self.head = torch.nn.Linear(width, vocab)

        def forward(self, tokens):
            hidden, _ = self.rnn(self.embed(tokens))
            return self.head(hidden)

    model = LanguageModel().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    shapes = [(32, 100), (16, 400), (64, 32), (48, 250), (16, 333), (64, 128), (24, 400), (40, 77), (64, 200),
              (16, 50), (32, 380), (56, 160), (20, 300), (64, 64)]
    generator = torch.Generator().manual_seed(2)
    for batch, length in shapes:
        tokens = torch.randint(0, vocab, (batch, length + 1), generator=generator).to(device)
        logits = model(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        train_step(loss, optimizer)
        del tokens, logits, loss
    return {"model": "LSTM 2x1024, vocab 16384", "shapes": shapes, "optimizer": "Adam"}


def unet_bf16_workload(torch, device):
    """A small U-Net (torch.nn only: 4 levels, 32..256 channels, skip connections, transposed convolutions) for
    segmentation under autocast bfloat16, AdamW, 10 steps of 8 images at 96..320 pixels, 12 classes."""
    torch.manual_seed(1)
    torch.backends.cudnn.benchmark = False

    def block(inputs, outputs):
        return torch.nn.Sequential(torch.nn.Conv2d(inputs, outputs, 3, padding=1), torch.nn.BatchNorm2d(outputs),
                                   torch.nn.ReLU(inplace=True), torch.nn.Conv2d(outputs, outputs, 3, padding=1),
                                   torch.nn.BatchNorm2d(outputs), torch.nn.ReLU(inplace=True))

    class UNet(torch.nn.Module):
        def __init__(self, widths=(32, 64, 128, 256), classes=12):
            super().__init__()
            self.down = torch.nn.ModuleList()
            channels = 3
            for width in widths:
                self.down.append(block(channels, width))
                channels = width
            self.up = torch.nn.ModuleList()
            self.merge = torch.nn.ModuleList()
            for width in reversed(widths[:-1]):
                self.up.append(torch.nn.ConvTranspose2d(channels, width, 2, stride=2))
                self.merge.append(block(2 * width, width))
                channels = width
            self.head = torch.nn.Conv2d(channels, classes, 1)

        def forward(self, images):
            skips = []
            hidden = images
            for index, level in enumerate(self.down):
                hidden = level(hidden)
                if index < len(self.down) - 1:
                    skips.append(hidden)
                    hidden = torch.nn.functional.max_pool2d(hidden, 2)
            for up, merge in zip(self.up, self.merge):
                hidden = merge(torch.cat([up(hidden), skips.pop()], dim=1))
            return self.head(hidden)

    model = UNet().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sizes = [128, 320, 96, 256, 192, 320, 160, 224, 288, 128]
    generator = torch.Generator().manual_seed(2)
    for size in sizes:
        images = torch.randn(8, 3, size, size, generator=generator).to(device)
        masks = torch.randint(0, 12, (8, size, size), generator=generator).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images), masks)
        train_step(loss, optimizer)
        del images, masks, loss
    return {"model": "U-Net 4 levels 32..256", "batch": 8, "sizes": sizes, "amp": "bfloat16"}


def vit_timm_workload(torch, device):
    """timm's ViT-S/16 (pretrained=False, 100 classes) under autocast bfloat16, AdamW, 10 steps of 224-pixel
    images at batches 16..64."""
    import timm

    torch.manual_seed(1)
    model = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=100).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batches = [32, 64, 16, 48, 64, 24, 40, 64, 16, 56]
    generator = torch.Generator().manual_seed(2)
    for batch in batches:
        images = torch.randn(batch, 3, 224, 224, generator=generator).to(device)
        labels = torch.randint(0, 100, (batch,), generator=generator).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        train_step(loss, optimizer)
        del images, labels, loss
    return {"model": "timm vit_small_patch16_224(pretrained=False)", "batches": batches, "amp": "bfloat16"}


def gpt2_lora_workload(torch, device):
    """A GPT-2 of 6 layers, 768 wide, vocabulary 16384 (transformers, from its config) fine-tuned with peft's
    LoRA (rank 8 on c_attn), AdamW on the adapters, 12 steps of batch 8 at sequence lengths 48..512."""
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(1)
    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, vocab_size=16384, n_positions=512)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn"], fan_in_fan_out=True, lora_dropout=0.0,
                      task_type="CAUSAL_LM")
    model = get_peft_model(GPT2LMHeadModel(config), lora).to(device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    lengths = [128, 512, 48, 300, 512, 200, 64, 450, 256, 512, 100, 384]
    generator = torch.Generator().manual_seed(2)
    for length in lengths:
        tokens = torch.randint(0, config.vocab_size, (8, length), generator=generator).to(device)
        loss = model(input_ids=tokens, labels=tokens).loss
        train_step(loss, optimizer)
        del tokens, loss
    return {"model": "transformers GPT-2 6x768 + peft LoRA r=8", "batch": 8, "lengths": lengths}


def gcn_pyg_workload(torch, device):
    """A 3-layer GCN (torch_geometric's GCNConv, 128 -> 256 -> 256 -> 16) on random graphs of 2,000 to 60,000
    nodes with 12 edges a node (scatters of odd sizes), Adam, 12 steps."""
    from torch_geometric.nn import GCNConv

    torch.manual_seed(1)

    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([GCNConv(128, 256), GCNConv(256, 256), GCNConv(256, 16)])

        def forward(self, features, edges):
            for index, conv in enumerate(self.convs):
                features = conv(features, edges)
                if index < len(self.convs) - 1:
                    features = torch.relu(features)
            return features

    model = GCN().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    nodes = [8000, 60000, 2000, 35000, 12345, 60000, 5000, 47000, 20000, 3000, 55555, 15000]
    generator = torch.Generator().manual_seed(2)
    for count in nodes:
        features = torch.randn(count, 128, generator=generator).to(device)
        edges = torch.randint(0, count, (2, 12 * count), generator=generator).to(device)
        labels = torch.randint(0, 16, (count,), generator=generator).to(device)
        loss = torch.nn.functional.cross_entropy(model(features, edges), labels)
        train_step(loss, optimizer)
        del features, edges, labels, loss
    return {"model": "torch_geometric GCN 3 layers", "nodes": nodes, "edges_per_node": 12}


def gpt2_generate_workload(torch, device):
    """Inference: a GPT-2 of 8 layers, 1024 wide (transformers, from its config, float16), greedy generate()
    with its key-value cache growing a token at a time, 6 requests of batch 1..16, prompts of 16..400 tokens,
    24..64 new tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(1)
    config = GPT2Config(n_layer=8, n_embd=1024, n_head=16, vocab_size=16384, n_positions=1024)
    model = GPT2LMHeadModel(config).to(device, dtype=torch.float16).eval()
    requests = [(4, 64, 48), (16, 400, 24), (1, 16, 64), (8, 200, 64), (2, 333, 32), (12, 48, 48)]
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for batch, prompt, new in requests:
            tokens = torch.randint(0, config.vocab_size, (batch, prompt), generator=generator).to(device)
            out = model.generate(tokens, attention_mask=torch.ones_like(tokens), max_new_tokens=new,
                                 min_new_tokens=new, do_sample=False, pad_token_id=0)
            del tokens, out
    return {"model": "transformers GPT-2 8x1024 float16, generate()", "requests (batch, prompt, new)": requests}


BUILDERS = {"transformer": transformer_workload, "cnn_amp": cnn_amp_workload, "mlp_varbatch": mlp_varbatch_workload,
            "lstm_varlen": lstm_varlen_workload, "unet_bf16": unet_bf16_workload, "vit_timm": vit_timm_workload,
            "gpt2_lora": gpt2_lora_workload, "gcn_pyg": gcn_pyg_workload, "gpt2_generate": gpt2_generate_workload}


def fraction_for(limit, total):
    """The double f for which PyTorch's size_t(f * double(total)) is `limit` (None when limit >= total: a
    fraction of 1 sets no limit). Python's float product is the same IEEE double product."""
    if limit >= total:
        return None
    f = limit / total
    while int(f * total) < limit:
        f = math.nextafter(f, 1.0)
    while int(f * total) > limit:
        f = math.nextafter(f, 0.0)
    return f if int(f * total) == limit else None


def run_worker(args):
    """One workload in this fresh process: recorded (--snapshot) or run under a limit (--limit). Writes a JSON
    result to args.result whatever happens."""
    result = {"workload": args.worker, "allocator_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
              "limit": args.limit, "completed": False, "oom": False}
    try:
        import torch

        device = torch.device("cuda", torch.cuda.current_device())
        properties = torch.cuda.get_device_properties(device)
        free_before, total = torch.cuda.mem_get_info(device)  # initialises the context
        result.update(device_name=properties.name, torch_version=torch.__version__, cuda_version=torch.version.cuda,
                      total_memory=properties.total_memory, mem_get_info_total=total,
                      used_after_init=total - free_before)
        if args.limit is not None:
            # setMemoryFraction: size_t(fraction * totalGlobalMem) in the newest PyTorch read (older ones:
            # cudaMemGetInfo's total; the two agree on the GPUs measured so far: both recorded).
            fraction = fraction_for(args.limit, properties.total_memory)
            result["fraction"] = fraction
            if fraction is None:
                result["error"] = "limit not below the device's total memory"
                return result
            result["allowed_bytes"] = int(fraction * properties.total_memory)
            result["allowed_bytes_by_mem_get_info_total"] = int(fraction * total)
            torch.cuda.set_per_process_memory_fraction(fraction, device)
        if args.snapshot:
            try:
                torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                         max_entries=MAX_ENTRIES)
            except TypeError:
                torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES)
        started = time.monotonic()
        try:
            result["parameters"] = BUILDERS[args.worker](torch, device)
            torch.cuda.synchronize(device)
            result["completed"] = True
        except torch.cuda.OutOfMemoryError as error:
            result["oom"] = True
            result["oom_message"] = " ".join(str(error).split())[:400]
        result["seconds"] = round(time.monotonic() - started, 3)
        stats = torch.cuda.memory_stats(device)
        free_after, _ = torch.cuda.mem_get_info(device)
        result.update(
            num_alloc_retries=stats.get("num_alloc_retries"), num_ooms=stats.get("num_ooms"),
            peak_reserved=stats.get("reserved_bytes.all.peak"), peak_requested=stats.get("requested_bytes.all.peak"),
            reserved_now=torch.cuda.memory_reserved(device), used_after_workload=total - free_after)
        # What the process holds besides PyTorch's reserved memory (context, libraries), at its end.
        result["outside_reserved"] = result["used_after_workload"] - result["reserved_now"]
        if result["num_ooms"]:
            result["oom"] = True  # an OOM caught inside (cuDNN tries another algorithm): it ran out all the same
        if args.snapshot and result["completed"]:
            snapshot = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            import pickle

            with open(args.snapshot, "wb") as file:
                pickle.dump(snapshot, file)
            result["trace_entries"] = len(snapshot["device_traces"][device.index])
    except Exception as error:  # noqa: BLE001 - a worker always answers
        result["error"] = f"{type(error).__name__}: {' '.join(str(error).split())[:400]}"
    finally:
        with open(args.result, "w") as file:
            json.dump(result, file, indent=1)
    return result


# --------------------------------------------------------------------------
# Parent
# --------------------------------------------------------------------------

class Budget:
    def __init__(self, seconds):
        self.deadline = time.monotonic() + seconds

    def left(self):
        return self.deadline - time.monotonic()


def worker(budget, outdir, name, conf, tag, limit=None, snapshot=None):
    """Runs one worker process; its result dict (with 'skipped' or 'error' when it did not answer)."""
    if budget.left() <= 5:
        return {"workload": name, "allocator_conf": conf, "limit": limit, "skipped": "time budget"}
    result_path = os.path.join(outdir, "runs", f"{tag}.json")
    command = [sys.executable, os.path.abspath(__file__), outdir, "--worker", name, "--result", result_path]
    if limit is not None:
        command += ["--limit", str(limit)]
    if snapshot:
        command += ["--snapshot", snapshot]
    environment = dict(os.environ)
    environment.pop("PYTORCH_ALLOC_CONF", None)
    environment["PYTORCH_CUDA_ALLOC_CONF"] = conf
    timeout = max(10, min(PROCESS_TIMEOUT_S, budget.left() + 30))
    try:
        done = subprocess.run(command, env=environment, timeout=timeout, capture_output=True, text=True)
        stderr = done.stderr[-2000:]
    except subprocess.TimeoutExpired:
        return {"workload": name, "allocator_conf": conf, "limit": limit, "error": f"no answer in {timeout:.0f} s"}
    try:
        with open(result_path) as file:
            result = json.load(file)
    except (OSError, ValueError):
        return {"workload": name, "allocator_conf": conf, "limit": limit, "error": f"no result: {stderr}"}
    if result.get("error"):
        result["stderr"] = stderr
    return result


def vrambench(binary, *args, timeout=300):
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr


def sim_verdict_placed(binary, trace, conf, limit, outdir, tag, placement):
    """The sim under PyTorch's limit `limit` (per_process_memory_fraction 0.5 of a sim of 2 x limit), its fresh
    segments placed `placement`: {fits, alloc_retries, ooms, first_oom_line}."""
    spec = f"pytorch[{conf}{',' if conf else ''}per_process_memory_fraction:0.5]"
    out = os.path.join(outdir, "runs", f"sim-{tag}-{placement}.json")
    status, _, stderr = vrambench(binary, "replay", trace, "--allocator", spec, "--device", "sim", "--sim-capacity",
                                  str(2 * limit), "--sim-placement", placement, "--fail-on-oom", "--quiet", "--out",
                                  out)
    if status not in (0, 3):
        return {"error": stderr.strip()[-400:]}
    with open(out) as file:
        entry = json.load(file)["benchmarks"][0]
    return {"fits": status == 0, "alloc_retries": entry.get("alloc_retries"), "ooms": entry.get("ooms"),
            "first_oom_line": entry.get("first_oom_line")}


def sim_verdict(binary, trace, conf, limit, outdir, tag):
    """The sim's verdict under both placements: fits True when both fit, False when neither does, None (either)
    when they differ; the top-down replay's figures; and each placement's own."""
    placed = {placement: sim_verdict_placed(binary, trace, conf, limit, outdir, tag, placement)
              for placement in PLACEMENTS}
    errors = [v["error"] for v in placed.values() if "error" in v]
    if errors:
        return {"error": errors[0]}
    outcomes = {v["fits"] for v in placed.values()}
    verdict = dict(placed["top-down"], by_placement={p: v["fits"] for p, v in placed.items()})
    verdict["fits"] = outcomes.pop() if len(outcomes) == 1 else None
    return verdict


def convert(snapshot, trace):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from vrambench import torch2trace

    return torch2trace.main([snapshot, trace]) == 0


def tune_entry(binary, trace, conf, outdir, tag, jobs):
    out = os.path.join(outdir, "runs", f"tune-{tag}.json")
    status, _, stderr = vrambench(binary, "tune", trace, "--quiet", "--jobs", str(jobs), "--out", out, timeout=600)
    if status != 0:
        return {"error": stderr.strip()[-400:]}
    with open(out) as file:
        tune = json.load(file)
    for entry in tune["benchmarks"]:
        if entry.get("pytorch_alloc_conf") == conf:
            return entry
    return {"error": f"no entry for '{conf}'"}


def baseline_used_bytes():
    """What the GPU had in use before our processes (nvidia-smi, MiB), or None."""
    if not shutil.which("nvidia-smi"):
        return None
    index = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", index],
                              capture_output=True, text=True, timeout=30)
        return int(done.stdout.strip().splitlines()[0]) * MiB
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def check(args):
    budget = Budget(args.budget_s)
    outdir = os.path.abspath(args.outdir)
    os.makedirs(os.path.join(outdir, "runs"), exist_ok=True)
    binary = os.path.abspath(args.vrambench)
    workloads = [w for w in args.workloads.split(",") if w]
    settings = args.settings.split(";") if args.settings is not None else list(SETTINGS)
    document = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "workloads": workloads,
                "settings": settings, "points": [{"point": p, "from": end, "offset_bytes": o} for p, end, o in POINTS], "baseline_used_bytes": baseline_used_bytes(),
                "recordings": [], "rows": [], "async": [], "skipped": []}

    # 1. Recordings: each workload's first setting alone on the GPU (what it holds besides PyTorch's memory is
    # measured there), the others several at once.
    recorded = {}

    def record(name, conf, alone):
        tag = f"{name}-{settings.index(conf)}"
        snapshot = os.path.join(outdir, "runs", f"{tag}.pickle")
        result = worker(budget, outdir, name, conf, f"record-{tag}", snapshot=snapshot)
        result.update(tag=tag, alone_on_the_gpu=alone)
        if result.get("completed") and os.path.exists(snapshot):
            trace = os.path.join(outdir, "runs", f"{tag}.trace.gz")
            if convert(snapshot, trace):
                recorded[(name, conf)] = trace
        print(f"fit_check: recorded {name} '{conf}': {'ok' if (name, conf) in recorded else result}", flush=True)
        return result

    document["recordings"] = [record(name, settings[0], True) for name in workloads if settings]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        document["recordings"] += list(pool.map(lambda job: record(*job, False),
                                                [(name, conf) for name in workloads for conf in settings[1:]]))
    baseline = document["baseline_used_bytes"] or 0
    overheads = [r["used_after_workload"] - r["reserved_now"] - baseline for r in document["recordings"]
                 if r.get("completed") and "used_after_workload" in r and r.get("alone_on_the_gpu")]
    document["overhead_bytes"] = max(overheads) if overheads else None
    document["overhead_note"] = ("what a job holds on the GPU besides PyTorch's reserved memory (CUDA context, "
                                 "cuBLAS, cuDNN; cudaMemGetInfo's used less memory_reserved() less the GPU's use "
                                 "before), the most over the recordings: add it to min_capacity_bytes for a GPU "
                                 "size (vrambench tune --overhead)")

    # 2. Predictions, and the sim's verdict at each capacity tried.
    plans = []
    for (name, conf), trace in sorted(recorded.items(), key=lambda item: (workloads.index(item[0][0]),
                                                                          settings.index(item[0][1]))):
        tag = f"{name}-{settings.index(conf)}"
        if budget.left() < 30:
            document["skipped"].append(f"tune {tag}")
            continue
        entry = tune_entry(binary, trace, conf, outdir, tag, args.tune_jobs)
        row = {"workload": name, "allocator_conf": conf, "trace": os.path.basename(trace)}
        if "error" in entry:
            row["error"] = entry["error"]
            document["rows"].append(row)
            continue
        prediction = int(entry["min_capacity_bytes"])
        low = int(entry.get("min_capacity_bytes_min") or prediction)
        recording = next(r for r in document["recordings"] if r.get("tag") == tag)
        row.update(predicted_min_capacity_bytes=prediction, predicted_min_capacity_bytes_min=low,
                   placement_dependent=entry.get("placement_dependent"),
                   min_capacity_exact=entry.get("min_capacity_exact"),
                   min_capacity_lowest_fit=entry.get("min_capacity_lowest_fit"),
                   predicted_peak_reserved_bytes=entry.get("peak_reserved_bytes"),
                   recorded_peak_reserved_bytes=recording.get("peak_reserved"),
                   smallest_gpu=(entry.get("smallest_gpu") or {}).get("name"), checks=[])
        for rank, (point, end, offset) in enumerate(POINTS):
            if point == "L" and low >= prediction:
                continue
            limit = (prediction if end == "max" else low) + offset
            label = f"{tag}-{end}{offset // MiB:+d}"
            sim = sim_verdict(binary, trace, conf, limit, outdir, label)
            row["checks"].append({"point": point, "offset_bytes": offset, "limit_bytes": limit, "sim": sim})
            plans.append((rank, row, row["checks"][-1], name, conf, limit, label))
        document["rows"].append(row)
        if conf == "":  # the async backend on the defaults' trace
            tune_path = os.path.join(outdir, "runs", f"tune-{tag}.json")
            with open(tune_path) as file:
                tune = json.load(file)
            async_entry = next(e for e in tune["benchmarks"] if e.get("pytorch_alloc_conf") == ASYNC)
            arow = {"workload": name, "allocator_conf": ASYNC,
                    "predicted_min_capacity_bytes": int(async_entry["min_capacity_bytes"]),
                    "min_device_bytes_min": async_entry.get("min_device_bytes_min"),
                    "min_device_bytes_max": async_entry.get("min_device_bytes_max"),
                    "peak_reserved_bytes_replay": async_entry.get("peak_reserved_bytes"), "checks": []}
            for rank, (point, offset) in enumerate((("P", 0), ("P - 64 MiB", -64 * MiB), ("P + 64 MiB", 64 * MiB))):
                limit = arow["predicted_min_capacity_bytes"] + offset
                probe = {"point": point, "offset_bytes": offset, "limit_bytes": limit,
                         "sim": {"fits": async_entry["peak_requested_bytes"] <= limit}}
                arow["checks"].append(probe)
                plans.append((rank + len(POINTS), arow, probe, name, ASYNC, limit, f"{name}-async{offset // MiB:+d}"))
            document["async"].append(arow)

    # 3. Real runs, most telling first, several at once (each process's limit counts only its own memory).
    plans.sort(key=lambda plan: plan[0])
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(worker, budget, outdir, name, conf, f"run-{tag}", limit): (check_, tag)
                   for _, _, check_, name, conf, limit, tag in plans}
        for future in concurrent.futures.as_completed(futures):
            check_, tag = futures[future]
            real = future.result()
            check_["real"] = {key: real.get(key) for key in
                              ("completed", "oom", "num_alloc_retries", "num_ooms", "peak_reserved", "allowed_bytes",
                               "allowed_bytes_by_mem_get_info_total", "fraction", "skipped", "error", "oom_message")}
            if real.get("skipped"):
                document["skipped"].append(tag)
            print(f"fit_check: {tag}: {summary(check_)}", flush=True)
    verdicts(document)
    document["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    device = next((r for r in document["recordings"] if r.get("device_name")), {})
    document.update(device_name=device.get("device_name"), torch_version=device.get("torch_version"),
                    total_memory=device.get("total_memory"), mem_get_info_total=device.get("mem_get_info_total"))
    with open(os.path.join(outdir, "fit-check.json"), "w") as file:
        json.dump(document, file, indent=1)
    table = markdown(document)
    with open(os.path.join(outdir, "fit-check.md"), "w") as file:
        file.write(table + "\n")
    print(table)
    return 0 if document["verdict"]["all_agree"] else 1


def real_fits(real):
    if not real or real.get("skipped") or (real.get("error") and not real.get("oom")):
        return None
    return bool(real.get("completed")) and not real.get("oom")


def summary(check_):
    real = check_.get("real") or {}
    outcome = real_fits(real)
    sim = check_.get("sim", {}).get("fits")
    shown = "skipped" if real.get("skipped") else "error" if outcome is None else "fits" if outcome else "OOM"
    return (f"limit {check_['limit_bytes'] / MiB:,.1f} MiB: sim {sim_word(sim)}, PyTorch {shown} "
            f"(retries {real.get('num_alloc_retries')}, ooms {real.get('num_ooms')})")


def sim_word(fits):
    return {True: "fits", False: "OOM", None: "either"}[fits]


def verdicts(document):
    agree = disagree = unsafe = conservative = inside = 0
    misses = []
    for row in document["rows"] + document["async"]:
        for check_ in row.get("checks", []):
            real = real_fits(check_.get("real"))
            sim = check_.get("sim", {}).get("fits")
            if real is None or sim is None:
                check_["agree"] = None
                inside += real is not None and sim is None and "error" not in check_.get("sim", {})
                continue
            check_["agree"] = real == sim
            agree += real == sim
            if real != sim:
                disagree += 1
                unsafe += sim and not real
                conservative += real and not sim
                misses.append(f"{row['workload']} '{row['allocator_conf']}' at {check_['limit_bytes']} B: "
                              f"sim {sim_word(sim)}, PyTorch {'fits' if real else 'OOM'}")
    for arow in document["async"]:
        peaks = [c.get("real", {}).get("peak_reserved") for c in arow["checks"] if c.get("real", {}).get("completed")]
        if peaks:
            arow["real_peak_reserved_bytes"] = max(peaks)
            low, high = arow.get("min_device_bytes_min"), arow.get("min_device_bytes_max")
            arow["real_peak_within_interval"] = low is not None and high is not None and low <= max(peaks) <= high
    document["verdict"] = {"checks_agree": agree, "checks_disagree": disagree, "unsafe": unsafe,
                           "conservative": conservative, "inside_interval": inside, "misses": misses,
                           "async_within_interval": [a.get("real_peak_within_interval") for a in document["async"]],
                           "all_agree": disagree == 0 and agree > 0}


def markdown(document):
    mib = lambda b: "-" if b is None else f"{b / MiB:,.1f}"
    cell = lambda c: "-" if c is None else ("skipped" if (c.get("real") or {}).get("skipped") else
                                            f"{sim_word(c['sim'].get('fits'))} / "
                                            f"{ {True: 'fits', False: 'OOM', None: 'error'}[real_fits(c.get('real'))]}"
                                            f"{'' if c.get('agree') in (True, None) else ' **MISS**'}")
    lines = [f"fit-check on {document.get('device_name')} (torch {document.get('torch_version')}), "
             f"{document.get('started')}: sim / PyTorch at each limit (set_per_process_memory_fraction)", "",
             "| workload | PYTORCH_CUDA_ALLOC_CONF | predicted min L-P MiB | exact | at P | P + 64 MiB | at L | "
             "L - 2 MiB | L - 64 MiB | retries at P sim/real | peak reserved replay/real MiB | smallest GPU |",
             "|---|---|---:|---|---|---|---|---|---|---|---|---|"]
    for row in document["rows"]:
        if "error" in row:
            lines.append(f"| {row['workload']} | `{row['allocator_conf']}` | error: {row['error'][:80]} |")
            continue
        checks = {c["point"]: c for c in row["checks"]}
        at = checks.get("P", {})
        low, high = row.get("predicted_min_capacity_bytes_min"), row["predicted_min_capacity_bytes"]
        predicted = mib(high) if low in (None, high) else f"{mib(low)}-{mib(high)}"
        lines.append(
            f"| {row['workload']} | `{row['allocator_conf'] or '(defaults)'}` | {predicted} "
            f"| {'yes' if row.get('min_capacity_exact') else 'no'} | {cell(checks.get('P'))} "
            f"| {cell(checks.get('P + 64 MiB'))} | {cell(checks.get('L'))} | {cell(checks.get('L - 2 MiB'))} "
            f"| {cell(checks.get('L - 64 MiB'))} "
            f"| {at.get('sim', {}).get('alloc_retries')}/{(at.get('real') or {}).get('num_alloc_retries')} "
            f"| {mib(row.get('predicted_peak_reserved_bytes'))}/{mib(row.get('recorded_peak_reserved_bytes'))} "
            f"| {row.get('smallest_gpu') or '-'} |")
    lines += ["", "| workload | async: predicted limit (requested peak) MiB | at P | P - 64 MiB | P + 64 MiB | "
                  "device MiB fast-late | real pool peak MiB | within |", "|---|---:|---|---|---|---|---:|---|"]
    for arow in document["async"]:
        checks = {c["point"]: c for c in arow["checks"]}
        lines.append(f"| {arow['workload']} | {mib(arow['predicted_min_capacity_bytes'])} | {cell(checks.get('P'))} "
                     f"| {cell(checks.get('P - 64 MiB'))} | {cell(checks.get('P + 64 MiB'))} "
                     f"| {mib(arow.get('min_device_bytes_min'))}-{mib(arow.get('min_device_bytes_max'))} "
                     f"| {mib(arow.get('real_peak_reserved_bytes'))} | {arow.get('real_peak_within_interval')} |")
    verdict = document["verdict"]
    lines += ["", f"checks agreeing: {verdict['checks_agree']}, disagreeing: {verdict['checks_disagree']} "
                  f"(unsafe: {verdict['unsafe']}, conservative: {verdict['conservative']}); inside the interval "
                  f"(either outcome predicted): {verdict['inside_interval']}; "
                  f"overhead to add for a GPU size: {mib(document.get('overhead_bytes'))} MiB; "
                  f"skipped for time: {len(document['skipped'])}"]
    lines += [f"- {miss}" for miss in verdict["misses"]]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="fit_check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--vrambench", default=os.path.join(ROOT, "build", "vrambench"))
    parser.add_argument("--budget-s", type=float, default=420, help="no run starts after this (default 420 s)")
    parser.add_argument("--jobs", type=int, default=4, help="PyTorch processes at once on the GPU (default 4)")
    parser.add_argument("--tune-jobs", type=int, default=os.cpu_count() or 1, help="tune's processes (default: CPUs)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated (default: {','.join(WORKLOADS)}; also {','.join(LIBRARY_WORKLOADS)})")
    parser.add_argument("--settings", help="';'-separated PYTORCH_CUDA_ALLOC_CONF values (default: the four)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--snapshot", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args)
        return 0
    unknown = [w for w in args.workloads.split(",") if w and w not in BUILDERS]
    if unknown or args.jobs < 1 or args.tune_jobs < 1 or args.budget_s <= 0:
        parser.error(f"unknown workload(s) {', '.join(unknown)}" if unknown else "--jobs and --budget-s must be positive")
    if not os.access(args.vrambench, os.X_OK):
        parser.error(f"no vrambench at {args.vrambench} (make -j16 first)")
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
