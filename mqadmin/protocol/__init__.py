"""The RocketMQ remoting protocol, declared once for both sides of the wire.

The client (``mqadmin.remoting``) and the mock broker (``mqadmin.mock``) both build and read
frames with :mod:`.codec`, name request and response codes from :mod:`.codes`, sign and verify
with :mod:`.acl`, share the values in :mod:`.constants`, ask :mod:`.versions` what a broker
release does, and build or parse each request header from its declaration in :mod:`.headers`.
Nothing here opens a socket; importing this package imports none of its modules.
"""
