"""On a CPU, the hf backend computes the output layer's product for the few rows of a decoding
step as `(W @ x.T).T`, the order MKL is fastest at (a 262k-token vocabulary, 2 rows: 3x faster
than `linear`, measured on the embedded Gemma 3's shape): the same logits, the same answers."""

import copy

import pytest
import torch
from test_models_hf import requests, spec

from finreflect_eval.models import load_model


def test_the_output_layer_gives_linear_s_logits_without_calling_linear(tiny_model_dir, monkeypatch):
    with load_model(spec(tiny_model_dir)) as lm:
        head = lm.hf_model.get_output_embeddings()
        for shape in ((1, 1), (2, 1), (8, 1), (2, 5)):
            hidden = torch.randn(*shape, head.in_features)
            expected = torch.nn.functional.linear(hidden, head.weight, head.bias)
            logits = head(hidden)
            assert torch.allclose(logits, expected, atol=1e-5)
            assert logits.stride() == expected.stride()  # as mask kernels read them
        # A copy of the model computes with its own weights.
        twin = copy.deepcopy(lm.hf_model).get_output_embeddings()
        with torch.no_grad():
            twin.weight.mul_(2)
        hidden = torch.randn(2, 1, head.in_features)
        assert torch.allclose(twin(hidden), 2 * head(hidden), atol=1e-4)

        # A whole constrained generation never takes the output layer's product through linear.
        real, heads = torch.nn.functional.linear, []

        def spied(x, weight, bias=None):
            heads.append(weight is head.weight)
            return real(x, weight, bias)

        monkeypatch.setattr(torch.nn.functional, "linear", spied)
        results = lm.generate(requests(3))
    assert all(result.ok for result in results)
    assert heads and not any(heads)  # the layers' products, not the output layer's


@pytest.mark.parametrize("rows", [1, 2, 8])
def test_the_rows_first_product_is_linear_s(rows):
    from finreflect_eval.models._output_layer import rows_first

    head = torch.nn.Linear(64, 1000)
    hidden = torch.randn(rows, 3, 64)
    assert torch.allclose(rows_first(head, hidden), head(hidden), atol=1e-5)
