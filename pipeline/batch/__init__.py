"""Batch answering for load-context: prompt input, the memo cache, exact batch search, packs."""
