"""What serves each policy role in a running client, and switching it.

    policy_set.py   the policy objects the client runs, the LLM backends they call, and the
                    plan -> load -> commit switch between versions (`PolicySet`)
    plugins.py      policies installed as Python packages (the ``memsdk.policies`` entry points)

What a client may be configured to serve is `memsdk.config` (``policies=``); the policies
themselves are `memsdk.policies`; the versions published for them are `memsdk.registry`.
"""
