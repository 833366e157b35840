"""What every LLM policy's call is made of, whatever its role.

    caller.py    the call: prompt -> `Chat` effect -> parse with one repair -> one re-ask
                 (`LLMCaller`), its record (`PolicyCall`) and failure counters (`PolicyStats`)
    prompts.py   versioned prompt templates, kept as data in ``prompts/``
    parsing.py   the one reader of a model's reply (`parse`)
    schema.py    what every role's output schema shares: the salvage helpers
"""
