"""The key dashboard: accounts, organisations, sign-in by emailed code, and the pages where
organisations and researchers create, see and revoke their own API keys (SPEC §3, §5).

Nothing in `edge/` imports this package: the edge stays standard library only. The
dashboard writes keys through the key stores' admin side (`edge.stores`) and keeps its own
state (accounts, sessions, invitations, audit, usage memory) in a separate store, so its
writes never touch the gate's key cache. See docs/dashboard.md.
"""
