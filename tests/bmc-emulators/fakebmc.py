"""pyghmi's fakebmc on 127.0.0.1 only (its own entry point listens on every address).

Usage: fakebmc.py PORT USERNAME PASSWORD. The BMC offers IPMI 2.0 with cipher suite 3 only,
keeps a power state and a boot device in memory, and prints what it is asked to do.
"""

import sys

import pyghmi.ipmi.bmc as bmc
from pyghmi.cmd.fakebmc import FakeBmc


class LoopbackFakeBmc(FakeBmc):
    def __init__(self, authdata, port):
        # FakeBmc.__init__ binds '::'; take its state, bind loopback.
        bmc.Bmc.__init__(self, authdata, port, address='127.0.0.1')
        self.powerstate = 'off'
        self.bootdevice = 'default'


def main():
    port, username, password = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    print('fakebmc listening on 127.0.0.1:%d' % port, flush=True)
    LoopbackFakeBmc({username: password}, port).listen()


if __name__ == '__main__':
    sys.exit(main())
