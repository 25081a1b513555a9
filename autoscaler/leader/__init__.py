"""One leader per fleet: the Lease contract and the Fence (base.py), an OS lock for one host
(local.py) and a DynamoDB lease for several (dynamodb.py). See docs/operations.md."""
