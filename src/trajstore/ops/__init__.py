"""Operations on whole buffer folders, what the ``trajstore`` command runs: copy and merge
(:mod:`~trajstore.ops.copy`), the self-check (:mod:`~trajstore.ops.verify`), what a folder holds
(:mod:`~trajstore.ops.info`), the episode table (:mod:`~trajstore.ops.episodes`) and previews
(:mod:`~trajstore.ops.preview`); for stream buffers, what one holds with its measured rates
(:mod:`~trajstore.ops.stream_info`), its self-check (:mod:`~trajstore.ops.stream_verify`) and its export
through an aligned view (:mod:`~trajstore.ops.stream_export`). Each uses the buffer's and the storages'
public API only.
"""

from trajstore.ops.copy import CopySummary, copy_episodes, merge_buffers
from trajstore.ops.episodes import EpisodeSummary, summarize_episodes
from trajstore.ops.info import BufferInfo, describe
from trajstore.ops.preview import PreviewResult, write_preview
from trajstore.ops.stream_export import export_stream_buffer
from trajstore.ops.stream_info import StreamBufferInfo, describe_streams, summarize_stream_episodes
from trajstore.ops.stream_verify import StreamVerifyReport, verify_stream_buffer
from trajstore.ops.verify import VerifyReport, verify_buffer

__all__ = ["copy_episodes", "merge_buffers", "CopySummary", "verify_buffer", "VerifyReport", "describe",
           "BufferInfo", "summarize_episodes", "EpisodeSummary", "write_preview", "PreviewResult",
           "describe_streams", "StreamBufferInfo", "summarize_stream_episodes", "verify_stream_buffer",
           "StreamVerifyReport", "export_stream_buffer"]
