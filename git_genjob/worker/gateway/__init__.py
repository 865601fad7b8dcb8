"""The gateway (SPEC §12.1): the one door from an attempt's generator to the models.

A loopback HTTP server per attempt (`server`), reached from the sandbox through the relay on
127.0.0.1:3129 to a Unix socket in the attempt's directory. It speaks each upstream's dialect
(`dialects`), checks the attempt's token, records each call's identity in a journal before
it sends (`calls`), replays recorded answers into later attempts of the same job, and adds the
worker's key to what it sends upstream (`upstream`). The key never reaches the generator.

May import: the documents, storage and replay planes and this package.
"""
