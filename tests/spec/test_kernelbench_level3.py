"""Whole models (KernelBench level 3) derive a spec, or are refused naming what blocks them: problem files of
this repository's own, each the smallest form of what a level-3 problem does (KernelBench's files never
enter it):

- sizes given as a list (1_MLP's `layer_sizes`) shrink like a tuple and stay a list;
- a recurrent layer runs on meta tensors by its shapes (kernelgen.spec.rnnshapes), with torch's checks;
- a plain tensor attribute (a vanilla RNN's `self.hidden`, reassigned by forward) is an input, and the
  reference starts every call from it;
- a causal mask `tril(ones(n, n)).view(1, 1, n, n)`, a constant through `log` and a constructor reading
  `torch.linspace(...)` numbers are drawable;
- refusals: the forward's random calls, each with its line; a weight whose size Model's code writes, above
  the cap of a test case.
"""

from __future__ import annotations

import pytest
import torch

from kernelgen.errors import ProblemFileError
from kernelgen.spec.given import read_spec
from kernelgen.spec.reference import load_reference
from kernelgen.spec.rnnshapes import rnn_shapes
from kernelgen.spec.sampling import draw_inputs

HEAD = "import torch\nimport torch.nn as nn\n\n"


def _problem(tmp_path, name: str, body: str):  # noqa: ANN001, ANN202
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + body)
    return path


def test_list_sizes_shrink_like_tuples_and_stay_lists(tmp_path):
    from tests.support.llm_problems import write_problem

    derived = read_spec(write_problem(tmp_path, "mlp"))
    spec = derived.spec
    assert [i.name for i in spec.inputs][:3] == ["x", "network_0_weight", "network_0_bias"]
    hidden = [c["network_0_weight"][0] for c in spec.test_cases]
    assert all(h < 2048 for h in hidden)  # the widths in the list shrank with the other sizes
    assert "_INIT = [2048, [2048, 2048], 1024]" in derived.text  # KernelBench's own, a list still


@pytest.mark.parametrize("module, args", [
    (lambda: torch.nn.GRU(12, 16, 3, bidirectional=True), lambda: (torch.empty(7, 5, 12), torch.empty(6, 5, 16))),
    (lambda: torch.nn.LSTM(12, 16, 2, batch_first=True, proj_size=8),
     lambda: (torch.empty(5, 7, 12), (torch.empty(2, 5, 8), torch.empty(2, 5, 16)))),
    (lambda: torch.nn.RNN(12, 16, 1), lambda: (torch.empty(7, 12), torch.empty(1, 16))),
])
def test_a_recurrent_layer_on_meta_tensors_has_its_real_shapes_at_once(module, args):
    def flat(out):  # noqa: ANN001, ANN202
        return [list(t.shape) for o in out for t in (o if isinstance(o, tuple) else (o,))]

    torch.manual_seed(0)
    mod, real_args = module(), args()
    real = flat(mod(*[a.normal_() if isinstance(a, torch.Tensor) else tuple(t.normal_() for t in a) for a in real_args]))
    meta = mod.to("meta")
    on_meta = tuple(a.to("meta") if isinstance(a, torch.Tensor) else tuple(t.to("meta") for t in a) for a in real_args)
    with rnn_shapes():
        assert flat(meta(*on_meta)) == real
        with pytest.raises(RuntimeError):
            meta(on_meta[0][..., :11], *on_meta[1:])  # 11 features for a first layer of 12: refused, as torch refuses it
        params = [p for p in meta._flat_weights]
        with pytest.raises(RuntimeError, match="initial state"):  # the shape check of rnn_shapes itself, below the module's
            torch.rnn_tanh(torch.empty(7, 5, 12, device="meta"), torch.empty(2, 5, 16, device="meta"), params[:4] if
                           len(params) >= 4 else params, True, 1, 0.0, False, False, False)


GRU = """
class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers)

    def forward(self, x, h0):
        output, h_n = self.gru(x, h0)
        return output

batch_size = 10
seq_len = 512
input_size = 128
hidden_size = 256
num_layers = 6

def get_inputs():
    return [torch.rand(seq_len, batch_size, input_size), torch.rand((num_layers, batch_size, hidden_size))]

def get_init_inputs():
    return [input_size, hidden_size, num_layers]
"""


def test_a_deep_gru_over_a_long_sequence_derives(tmp_path):
    spec = read_spec(_problem(tmp_path, "gru", GRU)).spec  # 6 layers x 512 steps: minutes step by step on meta
    assert spec.perf_cases[0]["x"] == [512, 10, 128] and all(c["x"][0] < 512 for c in spec.test_cases)
    assert "gru_weight_hh_l5" in spec.input_names


RNN_STATE = """
class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden = torch.randn((batch_size, hidden_size))
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)

    def forward(self, x):
        self.hidden = self.hidden.to(x.device)
        self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
        return self.hidden

batch_size = 8
input_size = 64
hidden_size = 32

def get_inputs():
    return [torch.rand(batch_size, input_size)]

def get_init_inputs():
    return [input_size, hidden_size]
"""


def test_a_plain_tensor_attribute_is_an_input_and_every_call_starts_from_it(tmp_path):
    derived = read_spec(_problem(tmp_path, "rnn_state", RNN_STATE))
    spec = derived.spec
    assert spec.input_names[-1] == "hidden" and spec.inputs[-1].init == "randn"
    assert "attribute `hidden` of Model" in derived.text
    fn = load_reference(spec)
    inputs = draw_inputs(spec, spec.test_cases[0], "float32", 3, "cpu")
    first, second = fn(*inputs), fn(*inputs)  # forward reassigns self.hidden: the reference puts it back
    assert torch.equal(first, second)


ATTENTION = """
import math

class Model(nn.Module):
    def __init__(self, n_embd, max_seqlen):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen)).view(1, 1, max_seqlen, max_seqlen))
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((1, 1, 1))))
        self.rates = [x.item() for x in torch.linspace(0, 0.1, 4)]

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1))) * self.logit_scale[0]
        att = att.masked_fill(self.bias[0, :, :T, :T] == 0, float('-inf'))
        return torch.softmax(att, dim=-1) @ v

batch_size = 4
seq_len = 64
n_embd = 96
max_seqlen = 128

def get_inputs():
    return [torch.rand(batch_size, seq_len, n_embd)]

def get_init_inputs():
    return [n_embd, max_seqlen]
"""


def test_a_causal_mask_a_constant_through_log_and_a_linspace_schedule_are_drawable(tmp_path):
    spec = read_spec(_problem(tmp_path, "attention", ATTENTION)).spec
    inits = {i.name: i.init for i in spec.inputs}
    assert inits["bias"] == "ones | tril" and inits["logit_scale"].startswith("full(2.30258")


def test_a_forward_drawing_random_numbers_is_refused_naming_each_call_and_its_line(tmp_path):
    body = RNN_STATE.replace("        self.hidden = self.hidden.to(x.device)\n",
                             "        self.hidden = torch.randn(x.shape[0], hidden_size, device=x.device)\n")
    with pytest.raises(ProblemFileError, match=r"the forward draws random numbers \(torch\.randn \(line \d+ of the reference: "
                                               r"`self\.hidden = torch\.randn\(x\.shape\[0\], hidden_size, device=x\.device\)`\)\)"):
        read_spec(_problem(tmp_path, "rnn_random", body))


def test_a_weight_written_in_models_code_above_the_cap_is_named(tmp_path):
    body = """
class Model(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Conv2d(3, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 64 * 64, 64)
        self.fc2 = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(torch.flatten(torch.relu(self.features(x)), 1))))

batch_size = 2
num_classes = 1000

def get_inputs():
    return [torch.rand(batch_size, 3, 64, 64)]

def get_init_inputs():
    return [num_classes]
"""
    with pytest.raises(ProblemFileError, match=r"Model's parameter `fc1.weight` is \[64, 262144\] \(16.8M elements\) in every "
                                               r"case .* written in Model's code\), above the 2M-element cap"):
        read_spec(_problem(tmp_path, "fixed_fc", body))
