"""The engine: OpGraph + anchors -> Plan, MindSpore-exact (operator rules, layouts, MindSpore's sharding-propagation search with its own edge costs, semi_auto's batch strategies)."""
