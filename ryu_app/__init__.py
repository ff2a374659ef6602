"""The Ryu controller: translates coex decisions into OpenFlow and serves the REST API."""
