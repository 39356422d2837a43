"""The dispatcher: durable per-tenant run queues, fair dispatch, attempts, retries, cancellation.

``logic.DispatchLogic`` is the pure state machine (no Kafka, no HTTP); ``topology`` puts it on
the processor runtime and ``executor`` runs target deliveries on a background event loop.
"""
