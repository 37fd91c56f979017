"""The device guard's rules against hand-written cases: for each, one op CUDA rejects and one it accepts.

The expectations are PyTorch-on-CUDA's behaviour (``TensorIterator``'s CPU-scalar rule, the
indexing rule of ``aten::index``, ``Tensor.numpy``), written down case by case, not read from the guard.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from device_guard import HOST, META, DeviceGuard, DeviceMixError

ACC = torch.device("cpu", 1)          # the stand-in accelerator
ACC2 = torch.device("cpu", 2)         # a second one (a model split over two GPUs)


def test_a_binary_op_mixing_a_host_tensor_and_an_accelerator_tensor_raises():
    with DeviceGuard():
        a, h = torch.ones(3, device=ACC), torch.ones(3)
        with pytest.raises(DeviceMixError, match="add"):
            a + h
        assert (a + a).device == ACC                         # one device: fine, and the result stays there


def test_a_0_dim_host_tensor_mixes_freely_but_a_1_element_host_vector_does_not():
    with DeviceGuard():
        a = torch.ones(3, device=ACC)
        assert (a * torch.tensor(2.0)).device == ACC         # 0-dim host: a CPU scalar
        with pytest.raises(DeviceMixError):
            a * torch.tensor([2.0])                          # shape (1,): a tensor, not a scalar


def test_an_accelerator_scalar_with_a_host_tensor_raises_both_ways():
    with DeviceGuard():
        s, h = torch.tensor(2.0, device=ACC), torch.ones(3)
        with pytest.raises(DeviceMixError):
            h * s                                            # only *host* scalars are exempt
        assert (s + torch.tensor(1.0)).device == ACC         # accelerator scalar + host scalar: fine


def test_in_place_add_into_a_host_tensor_from_an_accelerator_scalar_raises():
    """Crash 1 of issue 30: ``cos_sum[i] += cos.sum()`` with ``cos_sum`` on the host."""
    with DeviceGuard():
        host, acc = torch.zeros(4, dtype=torch.float64), torch.ones(5, device=ACC)
        with pytest.raises(DeviceMixError, match="into a host tensor"):
            host[1] += acc.double().sum()
        host[1] += acc.double().sum().item()                 # moved to the host first: fine
        acc_sum = torch.zeros(4, device=ACC)
        acc_sum[1] += torch.tensor(3.0)                      # host scalar into the accelerator: fine
        assert host[1].item() == 5.0 and acc_sum[1].item() == 3.0


def test_in_place_matrix_sum_into_host_raises_and_on_the_device_passes():
    """Crash 2 of issue 30: ``XtX += X.T @ X`` with ``XtX`` on the host and ``X`` on the device."""
    with DeviceGuard():
        X = torch.ones(5, 3, device=ACC)
        with pytest.raises(DeviceMixError):
            xtx = torch.zeros(3, 3)
            xtx += X.T @ X
        xtx = torch.zeros(3, 3, device=X.device)
        xtx += X.T @ X
        assert xtx.device == ACC and xtx[0, 0].item() == 5.0


def test_index_select_and_scatter_need_their_index_on_the_device():
    with DeviceGuard():
        a = torch.arange(6.0, device=ACC)
        with pytest.raises(DeviceMixError, match="index_select"):
            a.index_select(0, torch.tensor([0, 2]))
        assert a.index_select(0, torch.tensor([0, 2], device=ACC)).device == ACC
        with pytest.raises(DeviceMixError, match="scatter"):
            torch.zeros(6).scatter(0, torch.tensor([1], device=ACC), a[:1])
        assert torch.zeros(6, device=ACC).scatter(0, torch.tensor([1], device=ACC), a[:1]).device == ACC


def test_indexing_an_accelerator_tensor_with_a_host_index_is_allowed_but_not_the_reverse():
    with DeviceGuard():
        a, h = torch.arange(6.0, device=ACC), torch.arange(6.0)
        assert a[torch.tensor([0, 2])].device == ACC          # host index: PyTorch moves it
        with pytest.raises(DeviceMixError, match="__getitem__"):
            h[torch.tensor([0, 2], device=ACC)]
        with pytest.raises(DeviceMixError, match="__getitem__"):
            torch.arange(3.0, device=ACC2)[torch.tensor([0], device=ACC)]


def test_numpy_of_an_accelerator_tensor_raises_and_of_a_moved_one_passes():
    with DeviceGuard():
        a = torch.ones(3, device=ACC)
        with pytest.raises(DeviceMixError, match="numpy"):
            a.numpy()
        with pytest.raises(DeviceMixError, match="numpy"):
            np.asarray(a)
        assert a.cpu().numpy().tolist() == [1.0, 1.0, 1.0] and a.sum().item() == 3.0


def test_moves_follow_to_cpu_and_the_device_of_other_tensors():
    with DeviceGuard() as guard:
        h = torch.ones(3)
        a = h.to(ACC)
        assert guard.label(h) == HOST and guard.label(a) == 1 and a.device == ACC
        assert h.device == torch.device("cpu")                # the host tensor is not moved with it
        assert (a.cpu() + h).device == torch.device("cpu")
        with pytest.raises(DeviceMixError):
            a.to(torch.float64) + h                            # a dtype change stays on the device
        assert (torch.zeros_like(a) + a).device == ACC         # created from a device tensor
        assert (h.to(a) + a).device == ACC                     # .to(other): other's device


def test_a_module_moved_to_the_device_holds_its_parameters_and_gradients_there():
    with DeviceGuard() as guard:
        lin = torch.nn.Linear(3, 2).to(ACC)
        assert all(guard.label(p) == 1 for p in lin.parameters())
        with pytest.raises(DeviceMixError, match="linear"):
            lin(torch.ones(1, 3))                              # host input, device weights
        lin(torch.ones(1, 3, device=ACC)).sum().backward()
        assert guard.label(lin.weight.grad) == 1
        torch.optim.SGD(lin.parameters(), lr=0.1).step()       # parameters and gradients together
        assert guard.label(lin.weight) == 1


def test_a_deep_copy_of_a_moved_module_stays_on_the_device():
    import copy

    with DeviceGuard() as guard:
        lin = copy.deepcopy(torch.nn.Linear(3, 2).to(ACC))
        assert guard.label(lin.weight) == 1 and lin(torch.ones(1, 3, device=ACC)).device == ACC
        with pytest.raises(DeviceMixError):
            copy.deepcopy(torch.nn.Linear(3, 2))(torch.ones(1, 3, device=ACC))


def test_two_accelerators_do_not_mix():
    with DeviceGuard():
        a, b = torch.ones(3, device=ACC), torch.ones(3, device=ACC2)
        with pytest.raises(DeviceMixError, match="accelerator 1 and accelerator 2"):
            a - b
        assert (a - b.to(a.device)).device == ACC


def test_the_error_names_the_calling_line():
    with DeviceGuard():
        with pytest.raises(DeviceMixError, match="outside a notebook cell"):
            torch.ones(2, device=ACC) + torch.ones(2)


def test_a_device_that_is_not_a_cpu_is_rejected_by_name():
    from device_guard import device_label

    with pytest.raises(ValueError, match="cuda"):
        device_label("cuda")
    assert device_label("cpu") == HOST and device_label("cpu:2") == 2 and device_label("meta") == META


def test_a_cpu_generator_drawing_for_an_accelerator_tensor_raises_and_one_of_its_device_passes():
    """CUDA: ``Expected a 'cuda' device type for generator but found 'cpu'`` for factories, in-place fills and sampling."""
    with DeviceGuard() as guard:
        host_gen, acc_gen = torch.Generator().manual_seed(0), torch.Generator(device=ACC).manual_seed(0)
        assert host_gen.device == torch.device("cpu") and acc_gen.device == ACC
        assert isinstance(torch.default_generator, torch.Generator)        # plain generators still are generators
        with pytest.raises(DeviceMixError, match="generator of host draws for a tensor on accelerator 1"):
            torch.randn(3, device=ACC, generator=host_gen)
        with pytest.raises(DeviceMixError, match="normal_"):
            torch.empty(3, device=ACC).normal_(generator=host_gen)
        with pytest.raises(DeviceMixError, match="multinomial"):
            torch.multinomial(torch.ones(4, device=ACC), 2, generator=host_gen)
        with pytest.raises(DeviceMixError, match="generator of accelerator 1 draws for a tensor on host"):
            torch.randperm(5, generator=acc_gen)
        x = torch.randn(3, device=ACC, generator=acc_gen)
        assert guard.label(x) == 1
        assert guard.label(torch.multinomial(x.abs(), 2, generator=acc_gen)) == 1
        assert torch.randn(3, generator=host_gen).device == torch.device("cpu")
    assert torch.Generator is torch._C.Generator                            # restored on leaving


def _summary(x: torch.Tensor) -> dict:
    """A function that takes part in ``__torch_function__`` and returns a dict (as library functions may)."""
    if torch.overrides.has_torch_function((x,)):
        return torch.overrides.handle_torch_function(_summary, (x,), x)
    return {"total": {"sum": x.sum()}, "parts": [x * 2]}


def test_results_inside_a_returned_dict_are_labelled_where_the_op_ran():
    with DeviceGuard() as guard:
        out = _summary(torch.ones(3, device=ACC))
        assert guard.label(out["total"]["sum"]) == 1 and guard.label(out["parts"][0]) == 1
        with pytest.raises(DeviceMixError, match="expected all tensors on one device"):
            out["parts"][0] + torch.ones(3)
        with pytest.raises(DeviceMixError, match="numpy"):
            out["total"]["sum"].numpy()
        assert (out["parts"][0] + torch.ones(3, device=ACC)).device == ACC


def test_tensors_nested_in_an_ops_arguments_are_checked():
    with DeviceGuard():
        a, h = torch.ones(2, device=ACC), torch.ones(2)
        with pytest.raises(DeviceMixError):
            torch.block_diag(*[a, h])
        with pytest.raises(DeviceMixError):
            torch.einsum("i,i->", [a, h])                                    # a list argument
        assert torch.einsum("i,i->", [a, a]).device == ACC


def test_guarded_reaches_new_threads_and_the_kits_device_choice_and_undoes_both():
    import threading

    import device_guard
    from anatomy_kit.card import loading
    from anatomy_kit.hf import models

    original = models.resolve_device
    errors = []

    def mix():
        try:
            torch.ones(2, device=ACC) + torch.ones(2)
        except DeviceMixError as err:
            errors.append(err)

    with device_guard.guarded():
        assert models.resolve_device("cpu") == ACC and loading.resolve_device("auto") == ACC
        thread = threading.Thread(target=mix)
        thread.start()
        thread.join()
    assert len(errors) == 1 and "found host and accelerator 1" in str(errors[0])
    assert models.resolve_device is original and loading.resolve_device is original
    thread = threading.Thread(target=mix)                                    # outside: nothing is checked
    thread.start()
    thread.join()
    assert len(errors) == 1
