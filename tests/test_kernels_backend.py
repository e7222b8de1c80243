"""What both kernels share: the backend choice (including what a CUDA tensor selects, without a GPU),
the 64-bit offsets on shapes past 2**31 elements (without allocating them), the benchmark records."""

import contextlib
import inspect
import json
import re
import time
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import companion.kernels as kernels
from companion.kernels import block_sparse_attention as bsa
from companion.kernels import sparse_decode_attention as sda

needs_triton = pytest.mark.skipif(not (kernels.INTERPRET or torch.cuda.is_available()),
                                  reason="needs a GPU or TRITON_INTERPRET=1")


@contextlib.contextmanager
def no_host_sync():
    """Inside, any host read of a tensor's value (``.item()``, ``int(t)``, ``bool(t)``, ``.tolist()``)
    raises AssertionError: what a timed loop must never do."""
    def sync(*args, **kwargs):
        raise AssertionError("host sync inside a region that must not synchronise")

    names = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__")
    saved = {name: getattr(torch.Tensor, name) for name in names}
    for name in names:
        setattr(torch.Tensor, name, sync)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.Tensor, name, fn)


def fake_cuda(*shape):
    """A CUDA tensor without a GPU (no memory, no values): what a Colab GPU runtime would pass."""
    with FakeTensorMode():
        return torch.empty(*shape, device="cuda")


# --- the backend choice ---------------------------------------------------------------------------

def test_a_cuda_tensor_selects_triton_and_a_cpu_tensor_the_reference():
    q = fake_cuda(1, 2, 64, 16)
    assert q.is_cuda
    assert kernels.select_backend(q, "auto") == "triton"
    assert kernels.select_backend(q, "triton") == "triton"
    assert kernels.select_backend(q, "torch") == "torch"
    assert kernels.select_backend(torch.zeros(1), "auto") == "torch"  # also under the interpreter
    assert kernels.select_backend(torch.device("cuda"), "auto") == "triton"
    assert kernels.triton_runs_on("cuda") and kernels.triton_runs_on(q)
    assert kernels.triton_runs_on("cpu") == kernels.INTERPRET
    assert not kernels.triton_runs_on("meta")


def test_triton_on_the_cpu_without_the_interpreter_names_backend(monkeypatch):
    monkeypatch.setattr(kernels, "INTERPRET", False)
    assert not kernels.triton_runs_on(torch.zeros(1))
    with pytest.raises(ValueError, match="^backend: 'triton' needs CUDA tensors"):
        kernels.select_backend(torch.zeros(1), "triton")
    q = torch.randn(1, 1, 32, 16)
    with pytest.raises(ValueError, match="^backend: 'triton'"):
        bsa.block_sparse_attention(q, q, q, torch.ones(2, 2, dtype=torch.bool), 16, backend="triton")
    k, off, lens = torch.randn(8, 16), torch.zeros(1, 1, dtype=torch.int32), torch.full((1, 1), 8)
    with pytest.raises(ValueError, match="^backend: 'triton'"):
        sda.sparse_decode_attention(torch.randn(1, 2, 16), k, k, off, lens, backend="triton")
    assert bsa.block_sparse_attention(q, q, q, torch.ones(2, 2, dtype=torch.bool), 16).shape == q.shape  # auto


def test_both_ops_decide_through_select_backend(monkeypatch):
    """The public ops call select_backend(q, backend): what it answers for a CUDA tensor above is
    what they run; here a spy records the calls and its answer is the plan's backend."""
    calls = []

    def spy(x, backend="auto", name="q"):
        calls.append((x.device.type, backend))
        return kernels.select_backend(x, backend, name)

    monkeypatch.setattr(bsa, "select_backend", spy)
    monkeypatch.setattr(sda, "select_backend", spy)
    q = torch.randn(1, 1, 32, 16)
    plan = bsa.prepare_block_sparse_attention(q, q, q, torch.ones(2, 2, dtype=torch.bool), 16)
    k, off, lens = torch.randn(8, 16), torch.zeros(1, 1, dtype=torch.int32), torch.full((1, 1), 8)
    dplan = sda.prepare_sparse_decode_attention(torch.randn(1, 2, 16), k, k, off, lens, backend="auto")
    assert calls == [("cpu", "auto"), ("cpu", "auto")] and plan.backend == dplan.backend == "torch"


@pytest.mark.parametrize("call,name", [
    (lambda: kernels.select_backend(torch.zeros(1), "gpu"), "backend"),
    (lambda: kernels.select_backend([1.0], "auto"), "q"),
    (lambda: kernels.triton_runs_on(3), "device"),
    (lambda: kernels.check_tile(24, "block_n", 16, 128), "block_n"),
    (lambda: kernels.check_tile(256, "block_n", 16, 128), "block_n"),
    (lambda: kernels.check_launch_options(3, None), "num_warps"),
    (lambda: kernels.check_launch_options(4, 0), "num_stages"),
    (lambda: kernels.load_benchmark("flash"), "kernel"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


def test_bfloat16_is_refused_only_under_the_interpreter(monkeypatch):
    x = torch.zeros(2, dtype=torch.bfloat16)
    monkeypatch.setattr(kernels, "INTERPRET", True)
    with pytest.raises(ValueError, match="^k: bfloat16 is refused"):
        kernels.check_interpretable(x, "k")
    kernels.check_interpretable(x.half(), "k")
    monkeypatch.setattr(kernels, "INTERPRET", False)
    kernels.check_interpretable(x, "k")  # a GPU computes bf16 correctly


# --- 64-bit offsets past 2**31 elements, without allocating -----------------------------------------

if kernels.HAS_TRITON:
    import triton
    import triton.language as tl

    from companion.kernels import head_offset, row_offsets

    @triton.jit
    def _offsets_probe(Out, b, h, stride_b, stride_h, row0, stride_row):
        """The kernels' offset helpers on scalars from a launcher: head, then 16 rows from row0."""
        tl.store(Out, head_offset(b, h, stride_b, stride_h))
        r = tl.arange(0, 16)
        tl.store(Out + 1 + r, row_offsets(row0 + r, stride_row))

    @triton.jit
    def _offsets_probe_32bit(Out, b, h, stride_b, stride_h):
        """The same head offset in the arithmetic the kernel had before: 32-bit products."""
        tl.store(Out, b * stride_b + h * stride_h)


@needs_triton
def test_offsets_of_a_video_shape_past_2_31_elements_are_exact():
    """HunyuanVideo-sized q [B=8, H=24, N=119,056, D=128] has 2.9e9 elements: the last head of the
    last sequence starts beyond 2**31. Its strides come from a meta tensor (no memory); the probe
    runs the kernels' own helpers on them, as the launcher passes them."""
    q = torch.empty(8, 24, 119_056, 128, device="meta")
    assert q.numel() > 2**31
    b, h, n = q.shape[0] - 1, q.shape[1] - 1, q.shape[2] - 16
    out = torch.zeros(17, dtype=torch.int64, device="cuda" if torch.cuda.is_available() else "cpu")
    _offsets_probe[(1,)](out, b, h, q.stride(0), q.stride(1), n, q.stride(2))
    base = b * q.stride(0) + h * q.stride(1)
    assert base > 2**31 and out[0].item() == base
    assert out[1:].tolist() == [(n + i) * q.stride(2) for i in range(16)]
    assert base + out[-1].item() + q.shape[3] - 1 == q.numel() - 1  # the last element q[-1, -1, -1, -1]
    _offsets_probe_32bit[(1,)](out, b, h, q.stride(0), q.stride(1))
    assert out[0].item() != base  # the control: 32-bit products wrap, so the probe can fail


@needs_triton
def test_packed_rows_of_a_long_cache_past_2_31_elements_are_exact():
    """A packed CateKV cache at 128K tokens, 8 KV heads, batch 32, D = 128 holds 2**32 elements;
    the rows of its last head start at offset row 2**25 - 2**17."""
    k = torch.empty(2**25, 128, device="meta")
    row0 = 2**25 - 2**17
    out = torch.zeros(17, dtype=torch.int64, device="cuda" if torch.cuda.is_available() else "cpu")
    _offsets_probe[(1,)](out, 0, 0, 0, 0, row0, k.stride(0))
    assert out[1:].tolist() == [(row0 + i) * 128 for i in range(16)] and out[1].item() > 2**31


def test_every_stride_product_in_the_kernels_is_64_bit():
    """Every ``x * stride_*`` in the kernels' source is either inside the tested helpers or has its
    left side cast to int64: a new 32-bit product cannot slip in unseen."""
    for fn in (bsa._block_sparse_fwd, sda._sparse_decode_kernel, sda._merge_splits):
        src = re.sub(r"#.*", "", inspect.getsource(fn.fn))  # the code, not its comments
        products = re.findall(r"(\S+) \* stride_\w+", src)
        assert all(p.endswith(".to(tl.int64)") for p in products), (fn.fn.__name__, products)
        assert "head_offset(" in src


# --- the benchmark records ------------------------------------------------------------------------

def write(root, name, payload):
    path = root / "benchmarks" / "results" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))


def test_load_benchmark_reads_every_device_file(tmp_path):
    assert kernels.load_benchmark("block_sparse_attention", root=tmp_path) == []
    write(tmp_path, "block_sparse_attention-nvidia-h200.json",
          {"kernel": "block_sparse_attention", "records": [{"device": "NVIDIA H200", "ms": {"kernel": 1.0}}]})
    write(tmp_path, "block_sparse_attention-nvidia-a100.json",
          {"kernel": "block_sparse_attention", "records": [{"device": "NVIDIA A100"}]})
    write(tmp_path, "sparse_decode_attention-nvidia-h200.json", {"kernel": "sparse_decode_attention", "records": []})
    records = kernels.load_benchmark("block_sparse_attention", root=tmp_path)
    assert [r["device"] for r in records] == ["NVIDIA A100", "NVIDIA H200"]
    assert kernels.load_benchmark("sparse_decode_attention", root=tmp_path) == []
    write(tmp_path, "sparse_decode_attention-x.json", {"kernel": "block_sparse_attention", "records": []})
    with pytest.raises(ValueError, match="^kernel: sparse_decode_attention-x.json is not a results file"):
        kernels.load_benchmark("sparse_decode_attention", root=tmp_path)


def test_load_benchmark_outside_a_clone_is_empty(tmp_path, monkeypatch):
    import companion.book

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)  # a notebook run elsewhere still finds the clone the package lives in
    assert kernels.load_benchmark("block_sparse_attention") == kernels.load_benchmark("block_sparse_attention",
                                                                                     root=root)
    monkeypatch.setattr(companion.book, "repo_root", lambda start=None: None)  # an installed package, no clone
    assert kernels.load_benchmark("sparse_decode_attention") == []


def test_the_repository_results_are_gpu_measurements():
    """What the chapters read: GPU records only (none until a GPU has run benchmarks/run_all.py)."""
    for kernel in kernels.KERNELS:
        for record in kernels.load_benchmark(kernel):
            assert not record["smoke"] and "interpreter" not in record["device"]


# --- the autotuned launches, run under the interpreter -------------------------------------------

def cpu_bench(fn, quantiles=None, **kwargs):
    """The autotuner's benchmarker, timed on the CPU (the interpreter has no GPU driver to time with)."""
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    return [t, t, t]


@pytest.mark.skipif(not kernels.INTERPRET, reason="on a GPU the autotuned launch is tested in the kernel tests")
def test_the_autotuned_launches_run_and_pick_a_config(monkeypatch):
    """What a GPU runs by default (no fixed tile): the autotuner tries every config that fits and
    keeps one; here it times them on the CPU, so the GPU-only code path has run before a GPU does."""
    for module, tuner in ((bsa, bsa._block_sparse_fwd_tuned), (sda, sda._sparse_decode_kernel_tuned)):
        monkeypatch.setattr(module, "INTERPRET", False)  # the launcher's choice, as on a GPU
        monkeypatch.setitem(tuner.__dict__, "do_bench", cpu_bench)
    q, k, v = (torch.randn(1, 1, 100, 16) for _ in range(3))
    mask = torch.tensor([[True, False], [True, True]])
    plan = bsa.prepare_block_sparse_attention(q, k, v, mask, 64, backend="triton")
    assert plan.autotuned and plan.config is None  # the autotuner's choice is known after the first run
    torch.testing.assert_close(plan.run(q, k, v), bsa.block_sparse_attention_reference(q, k, v, mask, 64),
                               atol=1e-5, rtol=1e-5)
    fits = [{**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages}
            for c in bsa._tiles_fit(bsa.CONFIGS, {}, MASK_BLOCK=64)]
    assert plan.config in fits
    kc, off, lens = torch.randn(300, 16), torch.tensor([[0, 200]]), torch.tensor([[200, 100]])
    qd = torch.randn(1, 4, 16)
    dplan = sda.prepare_sparse_decode_attention(qd, kc, kc, off, lens, backend="triton", num_splits=2)
    assert dplan.autotuned and dplan.config is None
    torch.testing.assert_close(dplan.run(qd, kc, kc), sda.sparse_decode_attention_reference(qd, kc, kc, off, lens),
                               atol=1e-5, rtol=1e-5)
    assert dplan.config in [{**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages} for c in sda.CONFIGS]


@needs_triton
@pytest.mark.parametrize("config", bsa.CONFIGS, ids=str)
def test_every_autotune_config_equals_the_reference(config):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 1, 130, 16, generator=g) for _ in range(3))
    mask = torch.tensor([[True, True], [False, True]])
    out = bsa.block_sparse_attention(q, k, v, mask, 128, backend="triton", block_m=config.kwargs["BLOCK_M"],
                                     block_n=config.kwargs["BLOCK_N"], num_warps=config.num_warps,
                                     num_stages=config.num_stages)
    torch.testing.assert_close(out, bsa.block_sparse_attention_reference(q, k, v, mask, 128), atol=1e-5, rtol=1e-5)


# --- inputs that require grad: the kernels are forward-only -----------------------------------------

def _bsa_inputs(grad: bool):
    q, k, v = (torch.randn(1, 1, 16, 16, requires_grad=grad) for _ in range(3))
    return q, k, v, torch.ones(1, 1, dtype=torch.bool)


def _sda_inputs(grad: bool):
    k = torch.randn(8, 16)
    q = torch.randn(1, 1, 16, requires_grad=grad)
    off, lens = torch.zeros(1, 1, dtype=torch.int32), torch.full((1, 1), 8, dtype=torch.int32)
    return q, k, k, off, lens


@pytest.mark.skipif(not kernels.triton_runs_on("cpu"), reason="needs TRITON_INTERPRET=1 (set by conftest)")
def test_triton_refuses_inputs_that_require_grad_and_auto_picks_the_differentiable_reference():
    from companion.kernels import block_sparse_attention as bsa
    from companion.kernels import sparse_decode_attention as sda

    q, k, v, mask = _bsa_inputs(grad=True)
    with pytest.raises(ValueError, match="^q: requires grad"):
        bsa.block_sparse_attention(q, k, v, mask, block_size=16, backend="triton")
    qd, kd, vd, off, lens = _sda_inputs(grad=True)
    with pytest.raises(ValueError, match="^q: requires grad"):
        sda.sparse_decode_attention(qd, kd, vd, off, lens, backend="triton")
    # a plan prepared without grad refuses a run with grad, rather than dropping the gradient
    plan = bsa.prepare_block_sparse_attention(*_bsa_inputs(grad=False), block_size=16, backend="triton")
    with pytest.raises(ValueError, match="^q: requires grad"):
        plan.run(q, k, v)
    with torch.no_grad():  # no gradient wanted: the kernel runs
        assert plan.run(q, k, v).grad_fn is None
    # "auto" never drops a gradient: on a CPU it is the reference anyway, and it stays differentiable
    out = bsa.block_sparse_attention(q, k, v, mask, block_size=16, backend="auto")
    out.sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_auto_prefers_the_reference_when_a_gradient_is_needed(monkeypatch):
    from companion.kernels import block_sparse_attention as bsa
    from companion.kernels import sparse_decode_attention as sda

    for module in (bsa, sda):  # pretend a GPU: "auto" would pick Triton
        monkeypatch.setattr(module, "select_backend", lambda x, backend="auto", name="q": "triton")
    assert bsa.prepare_block_sparse_attention(*_bsa_inputs(grad=True), block_size=16).backend == "torch"
    assert sda.prepare_sparse_decode_attention(*_sda_inputs(grad=True)).backend == "torch"


def test_empty_queries_and_mixed_head_dims_are_named():
    from companion.kernels import block_sparse_attention as bsa
    from companion.kernels import sparse_decode_attention as sda

    q = torch.randn(1, 1, 0, 16)  # empty queries are fine with an empty mask, and named with any other
    assert bsa.block_sparse_attention(q, q, q, torch.ones(0, 0, dtype=torch.bool), block_size=16).shape == q.shape
    with pytest.raises(ValueError, match=r"^q: has no positions \(N = 0\), so block_mask"):
        bsa.block_sparse_attention(q, q, q, torch.ones(1, 1, dtype=torch.bool), block_size=16, backend="torch")
    with pytest.raises(ValueError, match="^k_heads: every block must have one head dimension"):
        sda.pack_varlen([[torch.randn(3, 16), torch.randn(2, 32)]], [[torch.randn(3, 16), torch.randn(2, 32)]])
    with pytest.raises(ValueError, match="^k_heads: expected every block"):
        sda.pack_varlen([[torch.randn(3)]], [[torch.randn(3)]])


from companion import kernels as _K
from companion.kernels import block_sparse_attention as _bsa, sparse_decode_attention as _sda

_NAN, _Q4 = float("nan"), torch.randn(1, 1, 16, 16)
_QD, _KD, _OFF = torch.zeros(1, 2, 16), torch.zeros(8, 16), torch.zeros(1, 1, dtype=torch.int32)
_LEN8, _LEN9 = torch.full((1, 1), 8, dtype=torch.int32), torch.full((1, 1), 9, dtype=torch.int32)
KERNELS_BAD_INPUTS = [  # the rest of the public functions; each refused naming its argument
    (lambda: _bsa.block_lut(torch.ones(2, 2)), "block_mask"),
    (lambda: _bsa.expand_block_mask(torch.ones(2, 2, dtype=torch.bool), 0, 4), "block_size"),
    (lambda: _bsa.expand_block_mask(torch.ones(2, 2, dtype=torch.bool), 2, 7), "n"),
    (lambda: _bsa.prepare_block_sparse_attention(_Q4, _Q4, _Q4, torch.ones(1, 1, dtype=torch.bool), backend="gpu"),
     "backend"),
    (lambda: _K.check_forward_only(q=torch.zeros(2, requires_grad=True)), "q"),
    (lambda: _sda.check_inputs(_QD, _KD, _KD, _OFF, _LEN9), "offsets"),
    (lambda: _sda.check_inputs(torch.full((1, 2, 16), _NAN), _KD, _KD, _OFF, _LEN8), "q"),
    (lambda: _sda.prepare_sparse_decode_attention(_QD, _KD, _KD, _OFF, _LEN8, num_splits=0), "num_splits"),
    (lambda: _sda.sparse_decode_attention_reference(torch.full((1, 2, 16), _NAN), _KD, _KD, _OFF, _LEN8), "q"),
    (lambda: _sda.sparse_decode_attention_triton(_QD, _KD, _KD, _OFF, _LEN8, block_n=24), "block_n"),
    # issue 49, through companion.validation: bools and fractions as sizes, NaN or bool scales
    (lambda: _bsa.expand_block_mask(torch.ones(2, 2, dtype=torch.bool), True, 2), "block_size: expected an integer"),
    (lambda: _bsa.expand_block_mask(torch.ones(2, 2, dtype=torch.bool), 2, 4.0), "n: expected an integer"),
    (lambda: _bsa.block_lut(torch.ones(2, 2, dtype=torch.bool), width=1.5), "width: expected an integer"),
    (lambda: _sda.sparse_decode_attention_reference(_QD, _KD, _KD, _OFF, _LEN8, sm_scale=_NAN),
     "sm_scale: expected a finite number > 0"),
    (lambda: _bsa.block_sparse_attention_reference(_Q4, _Q4, _Q4, torch.ones(1, 1, dtype=torch.bool), 16,
                                                   sm_scale=True), "sm_scale: expected a finite real number"),
]


@pytest.mark.parametrize("call, name", KERNELS_BAD_INPUTS)
def test_kernels_package_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
