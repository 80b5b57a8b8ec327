"""The language model: the Anthropic client (retries, usage, errors) and the tool loop."""

from teleton.llm.client import ContextOverflowError, LLMClient, LLMError, LLMResponse, LLMSettings, Usage
from teleton.llm.tool_loop import LoopLimits, LoopResult, ToolCall, ToolResult, run_tool_loop

__all__ = [
    "ContextOverflowError",
    "LLMClient",
    "LLMError",
    "LLMResponse",
    "LLMSettings",
    "LoopLimits",
    "LoopResult",
    "ToolCall",
    "ToolResult",
    "Usage",
    "run_tool_loop",
]
