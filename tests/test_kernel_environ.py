"""A chapter's kernel gets its variables without editing ``os.environ`` (chapters run in threads side by side)."""

from __future__ import annotations

import asyncio
import os

from jupyter_client.manager import AsyncKernelManager

from anatomy_kit.book.runner import kernel_manager


def test_each_kernel_manager_adds_its_own_variables_to_the_kernel_only(monkeypatch):
    launched = []

    async def launch(self, kernel_cmd, **kw):
        launched.append(kw["env"])

    monkeypatch.setattr(AsyncKernelManager, "_async_launch_kernel", launch)
    monkeypatch.setenv("SHARED", "process")
    monkeypatch.delenv("ANATOMY_KIT_CHAPTER_VAR", raising=False)
    a, b = kernel_manager({"ANATOMY_KIT_CHAPTER_VAR": "a"}), kernel_manager({"ANATOMY_KIT_CHAPTER_VAR": "b"})
    asyncio.run(a()._async_launch_kernel(["python"], env={"SHARED": "process"}))
    asyncio.run(b()._async_launch_kernel(["python"]))
    assert launched[0] == {"SHARED": "process", "ANATOMY_KIT_CHAPTER_VAR": "a"}
    assert launched[1]["ANATOMY_KIT_CHAPTER_VAR"] == "b" and launched[1]["SHARED"] == "process"
    assert "ANATOMY_KIT_CHAPTER_VAR" not in os.environ
