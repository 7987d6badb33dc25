#!/usr/bin/env python3
"""Record the CUDA memory history of real PyTorch training loops, as trace
fixtures for `vrambench replay` and the fidelity check against PyTorch.

    python3 lab/harnesses/record_torch_traces.py OUTDIR [--workloads resnet50,gpt2,resnet18_varres] [--seed N]
                                         [--alloc-conf CONF] [--memory-fraction F] [--no-history]

Runs on a GPU machine with torch, torchvision and (optionally) transformers.
Nothing is downloaded: models are randomly initialised and fed random data.
Each workload runs in a fresh Python process, so the caching allocator starts
empty and PyTorch's own memory_stats() peaks belong to that workload alone.
Memory history is turned on before the first allocation, with no stack
traces (they cost time and space and the replay does not need them). Each
training step runs inside torch.profiler.record_function("step N"), which the
snapshot keeps as an annotation and torch2trace turns into a step marker.

For each workload NAME it writes to OUTDIR:
  NAME.pickle     the snapshot, as torch.cuda.memory._dump_snapshot() writes it
  NAME.json       memory_stats() peaks (reserved/requested/allocated bytes,
                  num_alloc_retries, num_ooms) and the full memory_stats(),
                  torch / CUDA / cuDNN versions, device name, the workload's
                  parameters, the number of trace entries
  NAME.trace.gz   the snapshot converted by python/vrambench/torch2trace.py
Workloads:
  resnet50  torchvision ResNet-50 (weights=None), SGD with momentum, an epoch
            of 10 batches of 64 random 224x224 images plus a last partial batch
            of 40, then 2 evaluation batches under torch.no_grad()
  gpt2      a GPT-2-style decoder (transformers GPT2LMHeadModel, 6 layers,
            768 wide; a hand-written one when transformers is missing), AdamW,
            24 steps on batches of 8 random token sequences whose length varies
            from 128 to 1024
  resnet18_varres  torchvision ResNet-18 (weights=None), SGD, 16 steps of 32
            random images whose resolution varies from 128 to 320 pixels (as
            multi-scale training does): activations of changing sizes
  bert_amp  a BERT-base-sized encoder (transformers BertForSequenceClassification
            from a BertConfig; torch.nn.TransformerEncoder without
            transformers) trained in mixed precision (autocast float16 and a
            GradScaler), AdamW, 30 steps with dynamic padding: batches of 16..48
            sequences padded to their longest (lengths 32..512, to a multiple
            of 8)
  generate  an LLM generate() loop: a GPT-2-style decoder (12 layers, 768
            wide) under no_grad generating 64..192 new tokens greedily for 8
            prompts of 16..256 tokens in batches of 1..8, so the key/value
            cache grows token by token (transformers' generate(); a
            hand-written loop with a concatenated cache without it)
  generate_short  the same loop, 4 requests of 16..32 new tokens: small
            enough for tests/fixtures/torch (generate's trace is ~2 MB)
  two_stream  a two-stage pipeline on two CUDA streams: a side stream makes
            each batch and its first stage's activations, the default stream
            runs a 6-layer MLP on them after wait_stream; the batch tensors
            are record_stream()ed on the default stream and dropped on the side
            stream, 40 steps of varying batch size
PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF are cleared for the workers so
that PyTorch's defaults (what vrambench's `caching` models) apply, unless
--alloc-conf gives PYTORCH_ALLOC_CONF's value for them (set under both
names: PyTorch reads PYTORCH_ALLOC_CONF first, older PyTorch only the
deprecated PYTORCH_CUDA_ALLOC_CONF) (and
--memory-fraction calls torch.cuda.set_per_process_memory_fraction first,
which garbage_collection_threshold needs). --no-history runs the workloads
without recording (NAME.json only): what `vrambench tune`'s check against
real PyTorch runs under each setting (lab/harnesses/tune_check.py). The whole run
takes about a minute on an H100. Exit status: 0 when every workload was
recorded, 1 otherwise.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("resnet50", "gpt2", "resnet18_varres", "bert_amp", "generate", "generate_short", "two_stream")
MAX_ENTRIES = 5_000_000  # trace entries kept; the workloads make well under 1 M
# Where PyTorch reads its allocator settings, in its order: the first one set
# (even to "") is used (c10/core/AllocatorConfig.cpp); the others are the
# deprecated names.
ALLOC_CONF_NAMES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")


def allocator_conf(environment):
    """The allocator settings PyTorch runs under in `environment`."""
    return next((environment[name] for name in ALLOC_CONF_NAMES if name in environment), "")
WORKER_TIMEOUT_S = 300


# --------------------------------------------------------------------------
# Workloads (run inside a worker process, torch imported)
# --------------------------------------------------------------------------

def resnet50_workload(torch, device, seed):
    """ResNet-50 training epoch (10 full batches + 1 partial) and a short evaluation."""
    import torchvision

    torch.backends.cudnn.benchmark = False  # no autotuning: the same algorithms every run
    model = torchvision.models.resnet50(weights=None).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    criterion = torch.nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(seed)
    batches = [64] * 10 + [40]
    parameters = {"model": "torchvision resnet50(weights=None)", "optimizer": "SGD(lr=0.1, momentum=0.9)",
                  "train_batches": batches, "eval_batches": [64, 64], "image": [3, 224, 224]}

    def batch_of(size):
        # As a DataLoader with pin_memory hands batches over: pinned host
        # tensors copied to the device without blocking.
        images = torch.randn(size, 3, 224, 224, generator=generator).pin_memory()
        labels = torch.randint(0, 1000, (size,), generator=generator).pin_memory()
        return images.to(device, non_blocking=True), labels.to(device, non_blocking=True)

    def steps():
        model.train()
        for step, size in enumerate(batches):
            with torch.profiler.record_function(f"train step {step}"):
                images, labels = batch_of(size)
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(images), labels)
                loss.backward()
                optimizer.step()
                del images, labels, loss
        model.eval()
        with torch.no_grad():
            for step in range(2):
                with torch.profiler.record_function(f"eval step {step}"):
                    images, labels = batch_of(64)
                    correct = (model(images).argmax(dim=1) == labels).sum()
                    del images, labels, correct

    def release():
        nonlocal model, optimizer
        model = optimizer = None

    return parameters, steps, release


def _hand_written_gpt(torch, vocab, width, layers, heads, positions):
    """A GPT-2-shaped causal language model from torch.nn parts only."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(width)
            self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
            self.norm2 = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

        def forward(self, x, mask):
            h = self.norm1(x)
            x = x + self.attention(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(vocab, width)
            self.positions = nn.Embedding(positions, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab, bias=False)
            self.head.weight = self.tokens.weight  # tied, as in GPT-2

        def forward(self, input_ids, labels):
            length = input_ids.shape[1]
            mask = torch.full((length, length), float("-inf"), device=input_ids.device).triu(1)
            x = self.tokens(input_ids) + self.positions(torch.arange(length, device=input_ids.device))
            for block in self.blocks:
                x = block(x, mask)
            logits = self.head(self.norm(x))
            loss = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, vocab), labels[:, 1:].reshape(-1))
            return types.SimpleNamespace(loss=loss)  # shaped like transformers' output

    return Gpt()


def gpt2_workload(torch, device, seed):
    """GPT-2-style decoder trained on batches of varying sequence length."""
    import random

    vocab, width, layers, heads, positions, batch = 50257, 768, 6, 12, 1024, 8
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from transformers import GPT2Config, GPT2LMHeadModel

        # use_cache=False: training keeps no key/value cache, as training scripts set it.
        config = GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=width, n_layer=layers, n_head=heads,
                            use_cache=False)
        model = GPT2LMHeadModel(config)
        implementation = "transformers GPT2LMHeadModel"
    except Exception as error:  # missing, or not matching this torch: the hand-written one will do
        model = _hand_written_gpt(torch, vocab, width, layers, heads, positions)
        implementation = f"hand-written GPT-2-style decoder (transformers unusable: {type(error).__name__})"
        print(f"record_torch_traces: gpt2: {implementation}: {error}", file=sys.stderr)
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    choices = random.Random(seed)
    lengths = [choices.randrange(128, positions + 1, 64) for _ in range(24)]
    generator = torch.Generator(device=device).manual_seed(seed)
    parameters = {"model": implementation, "layers": layers, "width": width, "heads": heads,
                  "vocab": vocab, "batch": batch, "sequence_lengths": lengths, "optimizer": "AdamW(lr=3e-4)"}

    def steps():
        model.train()
        for step, length in enumerate(lengths):
            with torch.profiler.record_function(f"step {step} len {length}"):
                input_ids = torch.randint(0, vocab, (batch, length), device=device, generator=generator)
                loss = model(input_ids=input_ids, labels=input_ids).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                del input_ids, loss

    def release():
        nonlocal model, optimizer
        model = optimizer = None

    return parameters, steps, release


def resnet18_varres_workload(torch, device, seed):
    """ResNet-18 trained on batches whose image resolution changes every step."""
    import random

    import torchvision

    torch.backends.cudnn.benchmark = False
    model = torchvision.models.resnet18(weights=None).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    choices = random.Random(seed)
    resolutions = [choices.choice((128, 160, 192, 224, 256, 288, 320)) for _ in range(16)]
    generator = torch.Generator(device=device).manual_seed(seed)
    batch = 32
    parameters = {"model": "torchvision resnet18(weights=None)", "optimizer": "SGD(lr=0.05, momentum=0.9)",
                  "batch": batch, "resolutions": resolutions}

    def steps():
        model.train()
        for step, size in enumerate(resolutions):
            with torch.profiler.record_function(f"step {step} res {size}"):
                images = torch.randn(batch, 3, size, size, device=device, generator=generator)
                labels = torch.randint(0, 1000, (batch,), device=device, generator=generator)
                optimizer.zero_grad(set_to_none=True)
                loss = criterion(model(images), labels)
                loss.backward()
                optimizer.step()
                del images, labels, loss

    def release():
        nonlocal model, optimizer
        model = optimizer = None

    return parameters, steps, release



def _offline():
    """Keeps transformers from reaching for the network (models are built from configs)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def bert_amp_workload(torch, device, seed):
    """A BERT-base-sized encoder trained in mixed precision with dynamic padding."""
    import random

    vocab, width, layers, heads, classes = 30522, 768, 12, 12, 4
    _offline()
    try:
        from transformers import BertConfig, BertForSequenceClassification

        config = BertConfig(vocab_size=vocab, hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads,
                            intermediate_size=4 * width, max_position_embeddings=512, num_labels=classes)
        model = BertForSequenceClassification(config)
        implementation = "transformers BertForSequenceClassification"

        def loss_of(input_ids, mask, labels):
            return model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
    except Exception as error:  # missing or unusable: a plain encoder of the same shape
        nn = torch.nn
        embed = nn.Embedding(vocab, width)
        encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True),
                                        layers)
        head = nn.Linear(width, classes)
        model = nn.ModuleList([embed, encoder, head])
        implementation = f"torch.nn.TransformerEncoder (transformers unusable: {type(error).__name__})"
        print(f"record_torch_traces: bert_amp: {implementation}: {error}", file=sys.stderr)

        def loss_of(input_ids, mask, labels):
            hidden = encoder(embed(input_ids), src_key_padding_mask=~mask.bool())
            return nn.functional.cross_entropy(head(hidden[:, 0]), labels)
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    scaler = torch.amp.GradScaler("cuda")
    choices = random.Random(seed)
    batches = []
    for _ in range(30):
        lengths = [choices.randrange(32, 513) for _ in range(choices.randrange(16, 49))]
        batches.append((len(lengths), -(-max(lengths) // 8) * 8, lengths))
    generator = torch.Generator(device=device).manual_seed(seed)
    parameters = {"model": implementation, "layers": layers, "width": width, "precision": "autocast float16",
                  "batches": [[size, padded] for size, padded, _ in batches], "optimizer": "AdamW(lr=2e-5)"}

    def steps():
        model.train()
        for step, (size, padded, lengths) in enumerate(batches):
            with torch.profiler.record_function(f"step {step} batch {size} len {padded}"):
                input_ids = torch.randint(0, vocab, (size, padded), device=device, generator=generator)
                mask = (torch.arange(padded, device=device)[None, :] <
                        torch.tensor(lengths, device=device)[:, None]).long()
                labels = torch.randint(0, classes, (size,), device=device, generator=generator)
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = loss_of(input_ids, mask, labels)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                del input_ids, mask, labels, loss

    def release():
        nonlocal model, optimizer
        model = optimizer = None

    return parameters, steps, release


def generate_workload(torch, device, seed, request_count=8, new_tokens_range=(64, 193)):
    """Greedy generation with a growing key/value cache, prompts and batches of varying size."""
    import random

    vocab, width, layers, heads, positions = 50257, 768, 12, 12, 1024
    _offline()
    choices = random.Random(seed)
    requests = [(choices.choice([1, 2, 4, 8]), choices.randrange(16, 257), choices.randrange(*new_tokens_range))
                for _ in range(request_count)]
    generator = torch.Generator(device=device).manual_seed(seed)
    try:
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=width, n_layer=layers, n_head=heads,
                            use_cache=True)
        model = GPT2LMHeadModel(config).to(device).eval()
        implementation = "transformers GPT2LMHeadModel.generate (greedy, KV cache)"

        def generate(prompt, new_tokens):
            return model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                                  min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    except Exception as error:  # missing or unusable: a hand-written decoder with a concatenated cache
        nn = torch.nn
        implementation = f"hand-written decoder loop with a growing KV cache (transformers unusable: " \
                         f"{type(error).__name__})"
        print(f"record_torch_traces: generate: {implementation}: {error}", file=sys.stderr)
        embed = nn.Embedding(vocab, width).to(device)
        qkv = nn.ModuleList(nn.Linear(width, 3 * width) for _ in range(layers)).to(device)
        mlp = nn.ModuleList(nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
                            for _ in range(layers)).to(device)
        model = nn.ModuleList([embed, qkv, mlp])

        def generate(prompt, new_tokens):
            cache = [None] * layers
            tokens, step_input = prompt, prompt
            for _ in range(new_tokens):
                x = embed(step_input)
                for layer in range(layers):
                    q, k, v = qkv[layer](x).chunk(3, dim=-1)
                    if cache[layer] is not None:
                        k = torch.cat([cache[layer][0], k], dim=1)
                        v = torch.cat([cache[layer][1], v], dim=1)
                    cache[layer] = (k, v)
                    x = x + nn.functional.scaled_dot_product_attention(q, k, v)
                    x = x + mlp[layer](x)
                step_input = (x[:, -1:] @ embed.weight.T).argmax(dim=-1)
                tokens = torch.cat([tokens, step_input], dim=1)
            return tokens
    parameters = {"model": implementation, "layers": layers, "width": width,
                  "requests": [list(r) for r in requests]}

    def steps():
        with torch.no_grad():
            for step, (batch, prompt_length, new_tokens) in enumerate(requests):
                with torch.profiler.record_function(f"generate {step} batch {batch} prompt {prompt_length}"):
                    prompt = torch.randint(0, vocab, (batch, prompt_length), device=device, generator=generator)
                    out = generate(prompt, new_tokens)
                    del prompt, out

    def release():
        nonlocal model
        model = None

    return parameters, steps, release


def generate_short_workload(torch, device, seed):
    """generate's loop, 4 requests of 16..32 new tokens: a trace small enough for tests/fixtures."""
    return generate_workload(torch, device, seed, request_count=4, new_tokens_range=(16, 33))


def two_stream_workload(torch, device, seed):
    """A producer stream and a consumer stream handing tensors over with record_stream."""
    import random

    nn = torch.nn
    width, layers = 2048, 6
    stage1 = nn.Sequential(nn.Linear(1024, width), nn.ReLU()).to(device)
    stage2 = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(layers)],
                           nn.Linear(width, 10)).to(device)
    optimizer = torch.optim.SGD(list(stage1.parameters()) + list(stage2.parameters()), lr=1e-3)
    choices = random.Random(seed)
    sizes = [choices.choice([256, 512, 768, 1024, 2048, 4096]) for _ in range(40)]
    side = torch.cuda.Stream(device)
    main_stream = torch.cuda.current_stream(device)
    generator = torch.Generator(device=device).manual_seed(seed)
    parameters = {"stage1": "Linear(1024, 2048)+ReLU on a side stream", "stage2": f"{layers}-layer MLP, width {width}",
                  "batch_sizes": sizes, "optimizer": "SGD(lr=1e-3)"}

    def steps():
        for step, size in enumerate(sizes):
            with torch.profiler.record_function(f"step {step} batch {size}"):
                with torch.cuda.stream(side):
                    inputs = torch.randn(size, 1024, device=device, generator=generator)
                    labels = torch.randint(0, 10, (size,), device=device, generator=generator)
                    hidden = stage1(inputs)
                main_stream.wait_stream(side)
                for tensor in (inputs, labels, hidden):
                    tensor.record_stream(main_stream)  # used on the default stream, made on the side one
                loss = nn.functional.cross_entropy(stage2(hidden), labels)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                del inputs, labels, hidden, loss

    def release():
        nonlocal stage1, stage2, optimizer
        stage1 = stage2 = optimizer = None

    return parameters, steps, release


# --------------------------------------------------------------------------
# Worker: one workload in this (fresh) process
# --------------------------------------------------------------------------

PEAK_KEYS = ("reserved_bytes.all.peak", "requested_bytes.all.peak", "allocated_bytes.all.peak",
             "active_bytes.all.peak", "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free")


def _write_json(path, data):
    temporary = f"{path}.tmp"
    with open(temporary, "w") as file:
        json.dump(data, file, indent=2, sort_keys=True)
        file.write("\n")
    os.replace(temporary, path)


def run_worker(name, outdir, seed, history=True, memory_fraction=None):
    """Records workload `name`; writes NAME.pickle (unless `history` is off)
    and NAME.json. Returns 0 or 1."""
    import gc
    import pickle

    import torch

    if not torch.cuda.is_available():
        print(f"record_torch_traces: error: {name}: no CUDA device visible to torch", file=sys.stderr)
        return 1
    torch.manual_seed(seed)
    device = torch.device("cuda", torch.cuda.current_device())
    if memory_fraction is not None:
        torch.cuda.set_per_process_memory_fraction(memory_fraction, device)
    # Before anything is allocated, so the trace holds every allocation.
    if history:
        try:
            torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                     max_entries=MAX_ENTRIES)
        except TypeError:  # an older signature: keep its defaults
            torch.cuda.memory._record_memory_history(max_entries=MAX_ENTRIES)
    builder = {"resnet50": resnet50_workload, "gpt2": gpt2_workload,
               "resnet18_varres": resnet18_varres_workload, "bert_amp": bert_amp_workload,
               "generate": generate_workload, "generate_short": generate_short_workload,
               "two_stream": two_stream_workload}[name]
    started = time.monotonic()
    parameters, steps, release = builder(torch, device, seed)
    steps()
    torch.cuda.synchronize(device)
    seconds = time.monotonic() - started
    stats = dict(torch.cuda.memory_stats(device))
    # Free the model and optimizer too, so the trace ends as the process would.
    release()
    gc.collect()
    torch.cuda.synchronize(device)
    entries, snapshot_path = 0, None
    if history:
        snapshot = torch.cuda.memory._snapshot()  # what _dump_snapshot() pickles
        torch.cuda.memory._record_memory_history(enabled=None)
        snapshot_path = os.path.join(outdir, f"{name}.pickle")
        with open(snapshot_path, "wb") as file:
            pickle.dump(snapshot, file)
        traces = snapshot["device_traces"]
        entries = len(traces[device.index]) if device.index < len(traces) else 0
    properties = torch.cuda.get_device_properties(device)
    record = {
        "workload": name,
        "parameters": parameters,
        "seed": seed,
        "peaks": {key: stats.get(key) for key in PEAK_KEYS},
        "memory_stats": stats,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "cudnn_version": torch.backends.cudnn.version(),
        "device_name": torch.cuda.get_device_name(device),
        "device_capability": list(torch.cuda.get_device_capability(device)),
        "device_total_bytes": properties.total_memory,
        "allocator_conf": allocator_conf(os.environ),
        "memory_fraction": memory_fraction,
        "max_memory_reserved": torch.cuda.max_memory_reserved(device),
        "trace_entries": entries,
        "max_entries": MAX_ENTRIES,
        "history_complete": entries < MAX_ENTRIES,
        "workload_seconds": round(seconds, 3),
        "snapshot": os.path.basename(snapshot_path) if snapshot_path else None,
    }
    _write_json(os.path.join(outdir, f"{name}.json"), record)
    print(f"record_torch_traces: {name}: {entries} trace entries in {seconds:.1f} s; peak reserved "
          f"{stats.get('reserved_bytes.all.peak')} B, peak requested {stats.get('requested_bytes.all.peak')} B")
    if entries >= MAX_ENTRIES:
        print(f"record_torch_traces: warning: {name}: the history buffer filled up; the trace lacks its start",
              file=sys.stderr)
    return 0


# --------------------------------------------------------------------------
# Parent: one fresh process per workload, then conversion
# --------------------------------------------------------------------------

def convert(outdir, name):
    """Converts NAME.pickle to NAME.trace.gz with torch2trace and notes it in NAME.json."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
    from vrambench import torch2trace

    snapshot = os.path.join(outdir, f"{name}.pickle")
    trace = os.path.join(outdir, f"{name}.trace.gz")
    if torch2trace.main([snapshot, trace]) != 0:
        return 1
    json_path = os.path.join(outdir, f"{name}.json")
    with open(json_path) as file:
        record = json.load(file)
    record["trace"] = os.path.basename(trace)
    _write_json(json_path, record)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="record_torch_traces.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", help="where the snapshots, JSON and traces go")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, from {', '.join(WORKLOADS)} (default: all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--alloc-conf", help="PYTORCH_ALLOC_CONF for the workers (default: cleared)")
    parser.add_argument("--memory-fraction", type=float,
                        help="torch.cuda.set_per_process_memory_fraction(F) before the workload")
    parser.add_argument("--no-history", action="store_true", help="run without recording (NAME.json only)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        return run_worker(args.worker, args.outdir, args.seed, history=not args.no_history,
                          memory_fraction=args.memory_fraction)

    names = [name for name in args.workloads.split(",") if name]
    unknown = [name for name in names if name not in WORKLOADS]
    if unknown or not names:
        parser.error(f"unknown workload(s) {', '.join(unknown) or '(none)'}; known: {', '.join(WORKLOADS)}")
    os.makedirs(args.outdir, exist_ok=True)
    environment = dict(os.environ)
    for name in ALLOC_CONF_NAMES:
        environment.pop(name, None)
    if args.alloc_conf is not None:
        environment["PYTORCH_ALLOC_CONF"] = environment["PYTORCH_CUDA_ALLOC_CONF"] = args.alloc_conf
    worker_options = ["--no-history"] if args.no_history else []
    if args.memory_fraction is not None:
        worker_options += ["--memory-fraction", str(args.memory_fraction)]
    failed = []
    for name in names:
        started = time.monotonic()
        command = [sys.executable, os.path.abspath(__file__), args.outdir, "--worker", name, "--seed", str(args.seed),
                   *worker_options]
        try:
            status = subprocess.run(command, env=environment, timeout=WORKER_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            print(f"record_torch_traces: error: {name}: no result after {WORKER_TIMEOUT_S} s", file=sys.stderr)
            status = 1
        if status == 0 and not args.no_history:
            status = convert(args.outdir, name)
        print(f"record_torch_traces: {name}: {'done' if status == 0 else 'FAILED'} "
              f"in {time.monotonic() - started:.0f} s (process start included)")
        if status != 0:
            failed.append(name)
    if failed:
        print(f"record_torch_traces: error: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
