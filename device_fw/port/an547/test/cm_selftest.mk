# ---- the shared Cortex-M parts under QEMU (port/an547/test/cm_selftest.c) ------------------
#   make an547-cm-test   caches on, a fault reported then a restart in place, a nested fault
#                        then a system reset, across boots of one QEMU run; make an547-test
#                        runs it too. Included by device_fw/Makefile after the an547 rules.
AN547_CMT   := $(AN547_DIR)/cm_selftest.elf

.PHONY: an547-cm-test
an547-cm-test: $(AN547_CMT)
	@echo "== $< (qemu-system-arm -M mps3-an547, several boots)"; \
	  timeout 60 $(AN547_QEMU_RUN) -kernel $<

$(AN547_DIR)/obj/port/an547/test/cm_selftest.o: port/an547/test/cm_selftest.c $(AN547_HDRS) \
                                                Makefile port/an547/test/cm_selftest.mk
	@mkdir -p $(@D)
	$(AN547_CC) $(AN547_FLAGS) -Wno-format -c -o $@ $<

$(AN547_CMT): $(AN547_DIR)/obj/port/an547/test/cm_selftest.o $(AN547_DIR)/libhbtest.a \
              port/an547/an547_test.ld
	$(AN547_CC) $(AN547_ARCH) $(AN547_LD) -Tan547_test.ld -o $@ $< \
	  -Wl,--undefined=hb_an547_pre_main -Wl,--undefined=hb_an547_exit \
	  -Wl,--start-group $(AN547_DIR)/libhbtest.a -lc -lrdimon -lgcc -Wl,--end-group

an547-test: an547-cm-test
