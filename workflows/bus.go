package workflows
