/* Another preloaded library, standing for whatever LD_PRELOAD held before memshim run. */
int memshim_fake_other_marker(void);

int memshim_fake_other_marker(void)
{
	return 42;
}
