"""CateKV (Jiang et al., ICML 2025): consistent and adaptive heads, a hybrid KV cache, sparse decoding."""
