"""The scheduling core: recurrence, policies, the store and the timer.

Knows nothing of HTTP, of tenants' people, or of JavaScript; scripts are
reached through the `Runner` protocol that `almanac.worker` fills in.
"""
