"""The CDK app that deploys laya-serverless: artifact bucket, API function, REST API with auth."""
