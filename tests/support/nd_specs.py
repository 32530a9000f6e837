"""Specs the classic families refuse and the n-dimensional generator serves, by family (the families
issue 19 lists for KernelBench's level 1 and the GEMM half of level 2). Shapes are odd on purpose:
no dim a power of two, a reduced dim of 1500 where a looped pass is needed, batch dims that broadcast."""

from __future__ import annotations

from kernelgen.spec import OperatorSpec
from tests.support.offline_check import make_spec

X = [{"name": "x"}]


def _spec(name: str, inputs: list, body: str, cases: list, **fields) -> OperatorSpec:
    args = ", ".join(i["name"] for i in inputs)
    fields.setdefault("dtypes", ["float32", "float16", "bfloat16"])
    return make_spec(name=name, inputs=inputs, reference=f"def {name}({args}):\n{body}\n", test_cases=cases, **fields)


def _in(*names: str, **extra: dict) -> list[dict]:
    return [{"name": n, **extra.get(n, {})} for n in names]


# family -> specs
FAMILIES: dict[str, list[OperatorSpec]] = {
    "reduction": [
        _spec("sum_dim0", X, "    return x.sum(0)", [{"x": [6, 5]}, {"x": [1500, 3]}]),
        _spec("mean12", X, "    return x.mean(dim=(1, 2))", [{"x": [2, 6, 5, 7]}, {"x": [3, 33, 4, 3]}]),
        _spec("max_dim1", X, "    return torch.max(x, dim=1)[0]", [{"x": [2, 6, 5]}, {"x": [3, 33, 4]}]),
        _spec("argmax1", X, "    return torch.argmax(x, 1)", [{"x": [3, 9, 5]}, {"x": [2, 33, 4]}]),
        _spec("prod1", _in("x", x={"init": "uniform(0.5, 1.5)"}), "    return x.prod(dim=1)", [{"x": [2, 6, 5]}, {"x": [3, 9, 4]}]),
        _spec("frobenius", X, "    return x / torch.norm(x, p='fro')", [{"x": [2, 3, 4, 5]}, {"x": [3, 7, 9, 11]}]),
    ],
    "norm": [
        _spec("rms_channels", X, "    rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)\n    return x / rms",
              [{"x": [2, 6, 5, 7]}, {"x": [3, 33, 4, 3]}]),
        _spec("layer_norm3", _in("x", "w", "b"), "    return F.layer_norm(x, w.shape, w, b)",
              [{"x": [2, 6, 5, 7], "w": [6, 5, 7], "b": [6, 5, 7]}]),
        _spec("instance_norm", X, "    return F.instance_norm(x)", [{"x": [2, 3, 4, 5]}, {"x": [3, 2, 9, 11]}]),
        _spec("group_norm3", _in("x", "w", "b"), "    return F.group_norm(x, 3, w, b)",
              [{"x": [2, 6, 5, 7], "w": [6], "b": [6]}, {"x": [3, 9, 4, 3], "w": [9], "b": [9]}]),
        # Training-mode batch norm: batch statistics. In float16 the CPU reference itself is up to
        # 5e-3 from float64 (measured over 200 draws), which the kernel's float32 statistics are not.
        _spec("batch_norm_train", _in("x", "w", "b", "rm", "rv", rm={"init": "zeros"}, rv={"init": "ones"}),
              "    return F.batch_norm(x, rm.clone(), rv.clone(), w, b, training=True)",
              [{"x": [4, 6, 5, 7], "w": [6], "b": [6], "rm": [6], "rv": [6]}],
              tolerance={"float16": {"atol": 1e-2, "rtol": 1e-2}}),
    ],
    "loss": [
        _spec("mse", _in("p", "t"), "    return torch.mean((p - t) ** 2)", [{"p": [4, 9], "t": [4, 9]}, {"p": [3, 1500], "t": [3, 1500]}]),
        _spec("huber", _in("p", "t"), "    return F.smooth_l1_loss(p, t)", [{"p": [4, 9], "t": [4, 9]}]),
        _spec("kl_div", _in("p", "t", p={"init": "uniform(0.1, 1.0)"}, t={"init": "uniform(0.1, 1.0)"}),
              "    return F.kl_div(torch.log(p), t, reduction='batchmean')", [{"p": [4, 9], "t": [4, 9]}]),
        _spec("hinge", _in("p", "t"), "    return torch.mean(torch.clamp(1 - p * t, min=0))", [{"p": [4, 9], "t": [9]}]),
        _spec("cross_entropy", _in("p", "t", t={"dtype": "int64", "init": "randint(0, 10)"}),
              "    return F.cross_entropy(p, t)", [{"p": [8, 10], "t": [8]}, {"p": [33, 10], "t": [33]}]),
        _spec("triplet", _in("a", "p", "n"), "    return F.triplet_margin_loss(a, p, n)",
              [{"a": [5, 9], "p": [5, 9], "n": [5, 9]}]),
        _spec("cosine", _in("p", "t"), "    return torch.mean(1 - F.cosine_similarity(p, t, dim=1))",
              [{"p": [5, 9], "t": [5, 9]}]),
    ],
    "scan": [
        _spec("cumsum_reverse", X, "    return torch.cumsum(x.flip(1), 1).flip(1)", [{"x": [5, 9]}, {"x": [3, 1500]}]),
        _spec("cumsum_exclusive", X, "    return torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), "
              "torch.cumsum(x.narrow(1, 0, x.size(1) - 1), 1)), 1)", [{"x": [5, 9]}, {"x": [3, 1500]}]),
        _spec("cumprod1", _in("x", x={"init": "uniform(0.9, 1.1)"}), "    return torch.cumprod(x, dim=1)", [{"x": [5, 9]}, {"x": [3, 100]}]),
        _spec("cumsum_masked", _in("x", "m", m={"dtype": "bool", "init": "bernoulli(0.5)"}),
              "    return torch.cumsum(x * m, dim=1)", [{"x": [5, 9], "m": [5, 9]}, {"x": [3, 1500], "m": [3, 1500]}]),
    ],
    "matmul": [
        _spec("bmm", _in("a", "b"), "    return torch.bmm(a, b)", [{"a": [2, 16, 24], "b": [2, 24, 8]}, {"a": [3, 17, 9], "b": [3, 9, 33]}]),
        _spec("tensor3_matmul", _in("a", "b"), "    return torch.matmul(a, b)", [{"a": [3, 17, 9], "b": [9, 33]}]),
        _spec("einsum4", _in("a", "b"), '    return torch.einsum("bijl,lk->bijk", a, b)', [{"a": [2, 3, 5, 17], "b": [17, 9]}]),
        _spec("batched_matvec", _in("a", "b"), "    return torch.matmul(a, b)", [{"a": [2, 17, 9], "b": [9, 1]}]),
        # diag(a) @ b as KernelBench writes it: the classic pointwise family once read a[N].unsqueeze(1)
        # as a[col] (its broadcast of the input's own shape) and must leave it to nd
        _spec("diag_mm", _in("a", "b"), "    return a.unsqueeze(1) * b", [{"a": [9], "b": [9, 9]}, {"a": [17], "b": [17, 5]}]),
        _spec("triu_mm", _in("a", "b"), "    return torch.triu(a @ b)", [{"a": [33, 17], "b": [17, 33]}]),
        _spec("conv1x1", _in("x", "w"), "    return F.conv2d(x, w)", [{"x": [3, 5, 4, 9], "w": [4, 5, 1, 1]}]),
    ],
    "gemm_epilogue": [
        _spec("linear_leaky_sum", _in("x", "w", "b"), "    return F.leaky_relu(F.linear(x, w, b), 0.1).sum(0)",
              [{"x": [33, 17], "w": [45, 17], "b": [45]}]),
        _spec("gemm_logsumexp", _in("x", "w", "b"), "    return torch.logsumexp(F.linear(x, w, b), dim=1)",
              [{"x": [9, 17], "w": [24, 17], "b": [24]}]),
        _spec("gemm_group_norm", _in("x", "w", "b", "gw", "gb"), "    return F.group_norm(F.linear(x, w, b), 4, gw, gb)",
              [{"x": [9, 17], "w": [24, 17], "b": [24], "gw": [24], "gb": [24]}]),
        _spec("gemm_batch_norm", _in("x", "w", "b", "gw", "gb"),
              "    return F.batch_norm(F.linear(x, w, b), None, None, gw, gb, training=True)",
              [{"x": [9, 17], "w": [24, 17], "b": [24], "gw": [24], "gb": [24]}]),
        _spec("two_gemms", _in("x", "w1", "b1", "w2", "b2"),
              "    return torch.logsumexp(F.linear(torch.sigmoid(F.linear(x, w1, b1)), w2, b2), dim=1)",
              [{"x": [3, 5], "w1": [8, 5], "b1": [8], "w2": [6, 8], "b2": [6]}]),
    ],
    "pool": [
        _spec("max_pool1d", X, "    return F.max_pool1d(x, 4, 2, 2, 3)", [{"x": [2, 3, 20]}]),
        _spec("max_pool2d", X, "    return F.max_pool2d(x, 3, 2, 1, 2)", [{"x": [2, 3, 20, 21]}]),
        _spec("max_pool3d", X, "    return F.max_pool3d(x, 3, 2, 1, 2)", [{"x": [2, 3, 10, 11, 9]}]),
        _spec("avg_pool1d", X, "    return F.avg_pool1d(x, 8, 1, 4)", [{"x": [2, 3, 20]}]),
        _spec("avg_pool2d", X, "    return F.avg_pool2d(x, 3)", [{"x": [2, 3, 20, 22]}]),
        # PyTorch's CPU avg_pool3d has no float16 kernel: the reference could not run there
        _spec("avg_pool3d", X, "    return F.avg_pool3d(x, 3, 2, 1)", [{"x": [2, 3, 10, 11, 9]}], dtypes=["float32", "bfloat16"]),
        _spec("pool_after_gemm", _in("x", "w"), "    return F.avg_pool1d((x @ w).unsqueeze(1), 4).squeeze(1).amax(1)",
              [{"x": [5, 9], "w": [9, 16]}]),
    ],
    "attention": [
        _spec("sdpa", _in("q", "k", "v"), "    return F.scaled_dot_product_attention(q, k, v)",
              [{"q": [2, 3, 17, 8], "k": [2, 3, 17, 8], "v": [2, 3, 17, 8]}]),
        _spec("sdpa_causal", _in("q", "k", "v"), "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
              [{"q": [1, 2, 33, 16], "k": [1, 2, 33, 16], "v": [1, 2, 33, 16]}]),
    ],
}
ALL = {s.name: s for specs in FAMILIES.values() for s in specs}

# snapshots of nd files with a dispatch table (tests/offline/test_nd_tuning.py writes and checks them)
TUNING_SNAPSHOTS = ("nd_dispatch_mean12",)
