"""examples/ddp_train.py without Slurm: its data sharding, checkpoint and resume in a one-rank
gloo group, and docs/dlsubmit.md showing its checkpoint code as it is (the live run across
namespaced nodes is tests/live/test_ddp_live.py)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from script_helpers import load_script
from torch_check import TORCH

if TORCH:   # else every test fails with the fix (tests/conftest.py); the rest still collect
    import torch
    import torch.distributed as dist

pytestmark = pytest.mark.torch

ROOT = Path(__file__).resolve().parents[2]


def load_example() -> ModuleType:
    return load_script("examples/ddp_train.py", register=True)


ddp = load_example() if TORCH else ModuleType("ddp_train")


@pytest.fixture
def one_rank(tmp_path: Path) -> Iterator[None]:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_the_ranks_shares_of_a_step_make_up_its_global_batch_and_steps_differ() -> None:
    x0, y0 = ddp.batch(seed=5, step=3, rank=0, world=1, size=8, features=4)
    assert x0.shape == (8, 4) and y0.shape == (8, 1)
    shares = [ddp.batch(seed=5, step=3, rank=r, world=4, size=8, features=4) for r in range(4)]
    assert [s[0].shape for s in shares] == [(2, 4)] * 4
    # rank r holds rows r and r + 4 of the global batch
    for r, (x, y) in enumerate(shares):
        assert torch.equal(x, x0[[r, r + 4]]) and torch.equal(y, y0[[r, r + 4]])
    assert not torch.equal(ddp.batch(5, 4, 0, 1, 8, 4)[0], x0)


def test_weights_digest_is_sha256_over_names_and_tensor_bytes() -> None:
    model = torch.nn.Linear(1, 1)
    with torch.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(-2.0)
    # float32 1.0 is 00 00 80 3f little-endian, -2.0 is 00 00 00 c0
    expected = hashlib.sha256(b"weight" + bytes.fromhex("0000803f") + b"bias" + bytes.fromhex("000000c0"))
    assert ddp.weights_digest(model) == expected.hexdigest()


def test_checkpoint_then_resume_continues_with_the_same_weights_optimizer_and_dropout(
        one_rank: None, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ddp.make_model(4, 8)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def step(m: torch.nn.Module, o: torch.optim.Optimizer, s: int) -> float:
        x, y = ddp.batch(1, s, 0, 1, 8, 4)
        o.zero_grad()
        loss = torch.nn.functional.mse_loss(m(x), y)
        loss.backward()
        o.step()
        return loss.item()

    for s in range(3):
        step(model, opt, s)
    path = tmp_path / ddp.CHECKPOINT_NAME
    ddp.checkpoint(path, model, opt, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [ddp.CHECKPOINT_NAME, "store"]   # no temporary left
    expected = [step(model, opt, s) for s in (3, 4)]

    torch.manual_seed(99)   # another start: weights, optimizer and dropout stream all come from the file
    resumed = ddp.make_model(4, 8)
    resumed_opt = torch.optim.Adam(resumed.parameters(), lr=0.01)
    assert ddp.resume(path, resumed, resumed_opt) == 3
    assert [step(resumed, resumed_opt, s) for s in (3, 4)] == expected
    assert ddp.weights_digest(resumed) == ddp.weights_digest(model)
    assert ddp.resume(tmp_path / "none.pt", resumed, resumed_opt) == 0


def test_a_checkpoint_of_another_world_size_is_refused_naming_both(one_rank: None, tmp_path: Path) -> None:
    model = ddp.make_model(4, 8)
    opt = torch.optim.Adam(model.parameters())
    path = tmp_path / "ckpt.pt"
    torch.save({"step": 2, "world_size": 4, "model": model.state_dict(), "optimizer": opt.state_dict(),
                "rng": [torch.get_rng_state()] * 4}, path)
    with pytest.raises(ValueError, match=r"written by 4 ranks, this run has 1; keep the spec's instances"):
        ddp.resume(path, model, opt)


def test_the_interface_of_the_loopback_address_is_lo() -> None:
    assert ddp.interface_of("127.0.0.1") == "lo"
    assert ddp.local_address("127.0.0.1", 9) == "127.0.0.1"
    assert ddp.interface_of("203.0.113.77") is None   # TEST-NET-3 (RFC 5737): no interface holds it


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M)


def test_docs_show_the_examples_own_checkpoint_code() -> None:
    docs = (ROOT / "docs" / "dlsubmit.md").read_text()
    section = docs[docs.index("### The reference: a DDP job's checkpoint"):docs.index("## Containers")]
    source = (ROOT / "examples" / "ddp_train.py").read_text()
    blocks = code_blocks(section)
    assert len(blocks) == 2
    for block in blocks:
        assert block in source
    for name in ("save_atomically", "checkpoint", "resume"):
        assert f"def {name}(" in blocks[1]
    assert "dist.all_reduce(shared)" in blocks[0] and "return EXIT_PREEMPTED" in blocks[0]
