"""Skills: procedures in the open Agent Skills layout, offered under the same labels and approvals as the rest
(docs/skills.md)."""
