"""What serves each policy role in a running client, and switching it.

    policy_set.py   the policy objects the client runs and the plan -> load -> commit switch
                    between versions (`PolicySet`)
    backends.py     the LLM backends those policies call: one per endpoint, shared by the roles
                    that name it (`Backends`)
    plugins.py      policies installed as Python packages (the ``memsdk.policies`` entry points)

What a client may be configured to serve is `memsdk.config` (``policies=``); the policies
themselves are `memsdk.policies`; the versions published for them are `memsdk.registry`.
"""
