"""Step-cache policies (docs/caching.md): settings -> a per-step CachePlan the denoiser executes."""

from wanjax.domain.caching.plan import CachePlan
from wanjax.domain.caching.policies import plan_cache
from wanjax.domain.caching.settings import POLICIES, CacheSettings

__all__ = ["POLICIES", "CachePlan", "CacheSettings", "plan_cache"]
