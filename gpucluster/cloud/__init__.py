"""Cloud layer: the `cloud:` model, the pool plan and its guardrails, and the Pulumi components.

Only model, catalog, plan and guardrails are imported by the cluster checker; the Pulumi modules
(`config`, `aws`, `gcp`, `azure`, `nebius`, `outputs`) need the `cloud` extra and are imported by
the stacks alone.
"""
